"""What every provider has in common: a name, a config model, a schema, capabilities, health.

A provider kind (store, embedder, reranker, LLM) adds its own Protocol on top
of :class:`Provider`. Configs are pydantic models with ``extra="forbid"`` so a
typo in a setting is an error rather than a silently ignored key.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

HealthState = Literal["ok", "degraded", "down"]


class ProviderConfig(BaseModel):
    """Base for provider configs: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")


def config_schema(config: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of a provider config, as ``connection_schema()`` returns it.

    Pydantic already marks a ``SecretStr`` as ``writeOnly`` (and ``format: password``);
    for an optional secret, or a mapping of secrets (headers), that mark sits inside
    ``anyOf`` or ``additionalProperties``, so it is lifted to the property too: a UI
    reading only the property must still never echo a secret back.
    """
    return mark_write_only(config.model_json_schema())


def mark_write_only(schema: dict[str, Any]) -> dict[str, Any]:
    """Lift nested ``writeOnly`` marks to their property (see :func:`config_schema`); the
    registry applies it to every plugin's schema too."""
    for prop in schema.get("properties", {}).values():
        if _has_write_only(prop):
            prop["writeOnly"] = True
    return schema


def _has_write_only(node: Any) -> bool:
    if isinstance(node, dict):
        return node.get("writeOnly") is True or any(_has_write_only(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_write_only(v) for v in node)
    return False


def secret_fields(config: type[BaseModel]) -> list[str]:
    """Names of the config's fields that hold secrets (``writeOnly`` in its schema)."""
    props = config_schema(config).get("properties", {})
    return [name for name, prop in props.items() if prop.get("writeOnly")]


def checked_health(provider: Any) -> Health:
    """``provider.health()``, timed (``details.latency_ms``) and never raising: a plugin
    whose health check throws is reported ``down`` with the exception's type only."""
    started = time.perf_counter()
    try:
        health: Health = provider.health()
    except Exception as exc:
        health = Health.now("down", error=f"health check failed ({type(exc).__name__})")
    latency = round((time.perf_counter() - started) * 1000, 3)
    return health.model_copy(update={"details": {**health.details, "latency_ms": latency}})


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
