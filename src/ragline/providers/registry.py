"""Provider registry: every provider is found here by kind and name.

Built-in providers register through the same ``ragline.<kind>s`` entry-point
groups that third-party plugins use, so there is no ``if/elif`` on provider
names anywhere. ``register()`` exists for tests and for code that builds
providers at run time.

Plugins are trusted code, so which ones load is the operator's choice:
``RAGLINE_PROVIDERS_ALLOW`` (``Settings.providers_allow``, applied by
:meth:`Registry.configure`) names the third-party plugins that may load;
ragline's own providers always do. A plugin that fails to import, or whose
class is not a provider (no pydantic ``Config``), is recorded with the reason
and listed by ``GET /api/providers``; it never takes the server down.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pydantic import BaseModel, ValidationError

from ragline.errors import InvalidInput, ProviderNotFound
from ragline.providers.base import ProviderConfig, config_schema, mark_write_only

log = logging.getLogger(__name__)

KINDS = ("stores", "embedders", "rerankers", "llms", "tools")
BUILTIN_DISTRIBUTION = "ragline"


@dataclass(frozen=True)
class PluginProblem:
    """A plugin that is installed but not loaded: refused by the allow list, or broken."""

    kind: str
    name: str
    distribution: str | None
    reason: str


def _kind(word: str) -> str:
    """``store`` and ``stores`` both name the group ``ragline.stores``."""
    return word if word.endswith("s") else word + "s"


class Registry:
    """Maps (kind, name) to a provider class, loading each entry point when it is first
    asked for: a server using the embedded store and the local embedder never imports
    the Qdrant, PostgreSQL or OpenAI SDKs (loading every entry point at start cost a
    server ~2.5 s, most of its start-up). Listing a kind loads all of that kind."""

    def __init__(self) -> None:
        self._registered: dict[str, dict[str, type[Any]]] = {k: {} for k in KINDS}
        self._classes: dict[str, dict[str, type[Any]]] = {k: {} for k in KINDS}
        self._eps: dict[str, dict[str, tuple[EntryPoint, str | None]]] = {k: {} for k in KINDS}
        self._failed: dict[tuple[str, str], PluginProblem] = {}
        self._skipped: list[PluginProblem] = []
        self._allow: frozenset[str] | None = None
        self._loaded = False  # the entry points have been read (not imported)
        self._lock = threading.RLock()

    # -- configuration -------------------------------------------------------------------
    def configure(self, allow: Iterable[str] | None) -> None:
        """Which third-party plugins may load (``None``: all of them). Process-wide, like
        the entry points themselves; entry points are read again on the next lookup."""
        wanted = None if allow is None else frozenset(a.strip() for a in allow if a.strip())
        with self._lock:
            if wanted == self._allow and self._loaded:
                return
            self._allow = wanted
            self._loaded = False

    def reload(self) -> None:
        """Read the entry points again on the next lookup (after installing a plugin into
        a running process, as tests do)."""
        with self._lock:
            self._loaded = False

    def _allowed(self, kind: str, ep: EntryPoint, dist: str | None) -> bool:
        if dist == BUILTIN_DISTRIBUTION or self._allow is None:
            return True
        for item in self._allow:
            if item in (ep.name, dist, "*"):
                return True
            k, sep, n = item.partition(":")
            if sep and _kind(k) == kind and n in (ep.name, "*"):
                return True
        return False

    def _read_entry_points(self) -> None:
        """Which entry points there are and which may load; none is imported here."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            eps: dict[str, dict[str, tuple[EntryPoint, str | None]]] = {k: {} for k in KINDS}
            skipped: list[PluginProblem] = []
            for kind in KINDS:
                seen: set[str] = set()
                for ep in entry_points(group=f"ragline.{kind}"):
                    dist = ep.dist.name if ep.dist is not None else None
                    if ep.name in seen:
                        continue  # the first distribution on sys.path wins, as for imports
                    seen.add(ep.name)
                    if not self._allowed(kind, ep, dist):
                        skipped.append(PluginProblem(kind, ep.name, dist,
                                                     "not in RAGLINE_PROVIDERS_ALLOW"))
                        continue
                    eps[kind][ep.name] = (ep, dist)
            self._eps, self._skipped = eps, skipped
            self._classes = {k: {} for k in KINDS}
            self._failed = {}
            self._loaded = True

    def _load(self, kind: str, name: str) -> type[Any] | None:
        """The class of entry point ``name`` of ``kind``, imported on first use; None when
        there is none, it may not load, or it is broken (recorded, listed, never fatal)."""
        self._read_entry_points()
        with self._lock:
            cls = self._classes[kind].get(name)
            if cls is not None or (kind, name) in self._failed:
                return cls
            found = self._eps[kind].get(name)
            if found is None:
                return None
            ep, dist = found
            try:
                loaded: type[Any] = ep.load()
            except Exception as exc:  # a broken plugin must not take the server down
                log.warning("could not load %s provider %r: %s", kind, name, exc)
                self._failed[(kind, name)] = PluginProblem(
                    kind, name, dist, f"import failed: {type(exc).__name__}: {exc}")
                return None
            problem = _not_a_provider(kind, loaded)
            if problem:
                log.warning("%s provider %r is not usable: %s", kind, name, problem)
                self._failed[(kind, name)] = PluginProblem(kind, name, dist, problem)
                return None
            self._classes[kind][name] = loaded
            return loaded

    # -- lookups -------------------------------------------------------------------------
    def register(self, kind: str, name: str, cls: type[Any]) -> None:
        if kind not in self._registered:
            raise InvalidInput(f"Unknown provider kind '{kind}'")
        self._registered[kind][name] = cls

    def unregister(self, kind: str, name: str) -> None:
        self._registered.get(kind, {}).pop(name, None)

    def _all(self, kind: str) -> dict[str, type[Any]]:
        self._read_entry_points()
        for name in list(self._eps[kind]):
            self._load(kind, name)
        return {**self._classes.get(kind, {}), **self._registered.get(kind, {})}

    def has(self, kind: str, name: str) -> bool:
        """Whether ``name`` is a usable provider of ``kind``, importing only that one."""
        if kind not in self._registered:
            return False
        return name in self._registered[kind] or self._load(kind, name) is not None

    def get(self, kind: str, name: str) -> type[Any]:
        if kind not in self._registered:
            raise InvalidInput(f"Unknown provider kind '{kind}' (kinds: {', '.join(KINDS)})")
        cls = self._registered[kind].get(name) or self._load(kind, name)
        if cls is None:
            known = ", ".join(sorted(self._all(kind))) or "none"
            raise InvalidInput(f"Unknown {kind[:-1]} provider '{name}' (available: {known})")
        return cls

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
        return sorted(self._all(kind))

    # -- listing -------------------------------------------------------------------------
    def entry(self, kind: str, name: str) -> dict[str, Any]:
        """One provider as ``GET /api/providers`` lists it: name, kind, capabilities and
        the JSON Schema of its config (secrets ``writeOnly``)."""
        cls = self.get(kind, name)
        return {"name": name, "kind": kind, "capabilities": list(getattr(cls, "CAPABILITIES", [])),
                "schema": schema_of(cls)}

    def find(self, name: str, kind: str | None = None) -> list[dict[str, Any]]:
        """Every kind that has a provider called ``name`` (``openai`` is an embedder and a
        chat model), or only ``kind``; none: :class:`ProviderNotFound`."""
        kinds = [_kind(kind)] if kind else list(KINDS)
        found = [self.entry(k, name) for k in kinds if self.has(k, name)]
        if not found:
            raise ProviderNotFound(f"No provider '{name}'" + (f" of kind '{kind}'" if kind
                                                               else ""))
        return found

    def describe(self) -> dict[str, Any]:
        """Every provider by kind, with capabilities and schema, plus the plugins that did
        not load and why (for ``GET /api/providers``)."""
        out: dict[str, Any] = {"kinds": list(KINDS)}
        for kind in KINDS:
            out[kind] = [self.entry(kind, name) for name in sorted(self._all(kind))]
        out["errors"] = [asdict(p) for p in self._failed.values()]
        out["skipped"] = [asdict(p) for p in self._skipped]
        return out


def schema_of(cls: type[Any]) -> dict[str, Any]:
    """A provider class's connection schema: its own ``connection_schema()``, else the JSON
    Schema of its ``Config`` (tools describe their ``arguments`` instead)."""
    if hasattr(cls, "connection_schema"):
        return mark_write_only(dict(cls.connection_schema()))
    if isinstance(getattr(cls, "Config", None), type) and issubclass(cls.Config, BaseModel):
        return config_schema(cls.Config)
    return dict(getattr(cls, "arguments", {}))


def _not_a_provider(kind: str, cls: Any) -> str | None:
    """Why ``cls`` cannot be used as a provider of ``kind``, or None when it can."""
    if kind == "tools":  # tools are described by their arguments, not a connection config
        return None
    config = getattr(cls, "Config", None)
    if not (isinstance(config, type) and issubclass(config, BaseModel)):
        return "not a provider: it has no pydantic 'Config' class"
    if not callable(cls):
        return "not a provider: it cannot be instantiated"
    return None


registry = Registry()
