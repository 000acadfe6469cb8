"""What every provider has in common: a name, a config model, a schema, capabilities, health.

A provider kind (store, embedder, reranker, LLM) adds its own Protocol on top
of :class:`Provider`. Configs are pydantic models with ``extra="forbid"`` so a
typo in a setting is an error rather than a silently ignored key.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

HealthState = Literal["ok", "degraded", "down"]


class ProviderConfig(BaseModel):
    """Base for provider configs: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")


class Health(BaseModel):
    """Standard health answer (spec 000: status, timestamp, details, error)."""

    status: HealthState
    timestamp: str
    details: dict[str, Any] = {}
    error: str | None = None

    @classmethod
    def now(
        cls, status: HealthState, details: dict[str, Any] | None = None, error: str | None = None
    ) -> Health:
        return cls(
            status=status,
            timestamp=datetime.now(UTC).isoformat(),
            details=details or {},
            error=error,
        )


@runtime_checkable
class Provider(Protocol):
    """The surface the registry and ``GET /api/providers`` rely on."""

    name: ClassVar[str]
    kind: ClassVar[str]
    Config: ClassVar[type[ProviderConfig]]

    @classmethod
    def connection_schema(cls) -> dict[str, Any]: ...

    def capabilities(self) -> list[str]: ...

    def health(self) -> Health: ...
