"""Provider registry: every provider is found here by kind and name.

Built-in providers register through the same ``ragline.<kind>s`` entry-point
groups that third-party plugins use, so there is no ``if/elif`` on provider
names anywhere. ``register()`` exists for tests and for code that builds
providers at run time.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from pydantic import ValidationError

from ragline.errors import InvalidInput
from ragline.providers.base import ProviderConfig

log = logging.getLogger(__name__)

KINDS = ("stores", "embedders", "rerankers", "llms")


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

    def config(self, kind: str, name: str, options: Mapping[str, Any]) -> ProviderConfig:
        """Validate ``options`` against the provider's own ``Config``.

        Errors name the field and what is wrong with it, never the value given
        (a mistyped key next to an API key must not echo the key back).
        """
        cls = self.get(kind, name)
        try:
            config: ProviderConfig = cls.Config(**dict(options))
        except ValidationError as exc:
            problems = "; ".join(
                f"'{'.'.join(str(p) for p in e['loc']) or '(config)'}': {e['msg']}"
                for e in exc.errors(include_input=False, include_url=False))
            raise InvalidInput(f"Invalid config for {kind[:-1]} provider '{name}': "
                               f"{problems}") from None
        return config

    def build(self, kind: str, name: str, options: Mapping[str, Any]) -> Any:
        """The one way a provider of any kind is made: its class from the registry, its
        own typed config validated, then ``cls(config)``."""
        cls = self.get(kind, name)
        return cls(self.config(kind, name, options))

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
                    "schema": cls.connection_schema(),
                    "capabilities": list(getattr(cls, "CAPABILITIES", [])),
                }
                for name, cls in sorted(classes.items())
            ]
        return out


registry = Registry()
