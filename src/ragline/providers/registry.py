"""Provider registry: every provider is found here by kind and name.

Built-in providers register through the same ``ragline.<kind>s`` entry-point
groups that third-party plugins use, so there is no ``if/elif`` on provider
names anywhere. ``register()`` exists for tests and for code that builds
providers at run time.
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from typing import Any

from ragline.errors import InvalidInput

log = logging.getLogger(__name__)

KINDS = ("stores", "embedders", "rerankers", "llms", "tools")


class Registry:
    """Maps (kind, name) to a provider class, loading entry points lazily."""

    def __init__(self) -> None:
        self._classes: dict[str, dict[str, type[Any]]] = {k: {} for k in KINDS}
        self._loaded = False

    def _load_entry_points(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for kind in KINDS:
            for ep in entry_points(group=f"ragline.{kind}"):
                if ep.name in self._classes[kind]:
                    continue
                try:
                    self._classes[kind][ep.name] = ep.load()
                except Exception as exc:  # a broken plugin must not take the server down
                    log.warning("could not load %s provider %r: %s", kind, ep.name, exc)

    def register(self, kind: str, name: str, cls: type[Any]) -> None:
        if kind not in self._classes:
            raise InvalidInput(f"Unknown provider kind '{kind}'")
        self._classes[kind][name] = cls

    def get(self, kind: str, name: str) -> type[Any]:
        self._load_entry_points()
        try:
            return self._classes[kind][name]
        except KeyError:
            known = ", ".join(sorted(self._classes.get(kind, {}))) or "none"
            raise InvalidInput(
                f"Unknown {kind[:-1]} provider '{name}' (available: {known})"
            ) from None

    def names(self, kind: str) -> list[str]:
        self._load_entry_points()
        return sorted(self._classes[kind])

    def describe(self) -> dict[str, list[dict[str, Any]]]:
        """Every registered provider with its schema (for ``GET /api/providers``)."""
        self._load_entry_points()
        out: dict[str, list[dict[str, Any]]] = {}
        for kind, classes in self._classes.items():
            out[kind] = [
                {
                    "name": name,
                    "schema": (cls.connection_schema() if hasattr(cls, "connection_schema")
                               else getattr(cls, "arguments", {})),
                    "capabilities": list(getattr(cls, "CAPABILITIES", [])),
                }
                for name, cls in sorted(classes.items())
            ]
        return out


registry = Registry()
