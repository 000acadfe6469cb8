"""Named connections: a provider plus a validated config, under an id.

Three sources, one namespace:

* ``local`` — the data directory's own store (always present, cannot be changed);
* the config file / settings (``[connections.ID]`` in ragline.toml, or
  ``RAGLINE_CONNECTIONS``), validated when the server starts, so a typo stops it
  with the field named;
* ``POST /api/connections`` by an admin, stored in the catalog (secret fields in
  a column of their own; no answer ever carries them).

A connection's provider is built on first use and kept until :meth:`close`.
``?service=ID`` routing (``services/connections/routing.py``) resolves ids here.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from ragline.catalog.tables import ConnectionRows
from ragline.errors import ConfigError, ConnectionNotFound, InvalidInput, RaglineError
from ragline.providers.base import Health, ProviderConfig, checked_health, secret_fields
from ragline.providers.registry import registry
from ragline.providers.stores.base import VectorStore
from ragline.settings import Settings

log = logging.getLogger(__name__)

LOCAL = "local"
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
Source = Literal["builtin", "config", "api"]


@dataclass(frozen=True)
class Connection:
    id: str
    kind: str
    provider: str
    source: Source
    config: ProviderConfig | None = field(repr=False)  # None: the local store
    created_at: str | None = None

    def view(self, *, full: bool) -> dict[str, Any]:
        """What callers see: never a secret. ``full`` (admins) adds the options and the
        names of the secrets that are set."""
        cls = registry.get(self.kind, self.provider)
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "provider": self.provider,
                               "source": self.source,
                               "capabilities": list(getattr(cls, "CAPABILITIES", []))}
        if full and self.config is not None:
            secrets = set(secret_fields(type(self.config)))
            out["options"] = self.config.model_dump(mode="json", exclude=secrets)
            out["secrets_set"] = sorted(s for s in secrets
                                        if getattr(self.config, s, None) is not None)
            out["created_at"] = self.created_at
        return out


def check_id(cid: str) -> str:
    if not isinstance(cid, str) or not ID_RE.match(cid):
        raise InvalidInput("Invalid connection 'id': 1-64 letters, digits, '.', '_' or '-', "
                           "starting with a letter or digit")
    return cid


def validate(kind: str, provider: str, options: dict[str, Any]) -> ProviderConfig:
    """The provider's typed config; an error names the field (400), never its value."""
    if not isinstance(options, dict):
        raise InvalidInput("'options' must be an object")
    return registry.config(kind, provider, options)


class ConnectionService:
    def __init__(self, settings: Settings, table: ConnectionRows, store: VectorStore) -> None:
        self.settings = settings
        self.table = table
        self.store = store
        self._instances: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._configured = self._from_settings(settings)

    @staticmethod
    def _from_settings(settings: Settings) -> dict[str, Connection]:
        out: dict[str, Connection] = {}
        for cid, entry in settings.connections.items():
            where = f"connections.{cid}"
            try:
                check_id(cid)
                if cid == LOCAL:
                    raise InvalidInput("'local' is the data directory's own store")
                if not isinstance(entry, dict) or not isinstance(entry.get("provider"), str):
                    raise InvalidInput("'provider' is required (a store provider name)")
                unknown = set(entry) - {"provider", "options", "kind"}
                if unknown:
                    raise InvalidInput(f"unknown key '{sorted(unknown)[0]}' (use 'provider' "
                                       "and 'options')")
                kind = str(entry.get("kind", "stores"))
                config = validate(kind, entry["provider"], entry.get("options") or {})
            except RaglineError as exc:
                raise ConfigError(f"invalid setting '{where}': {exc.message}") from None
            out[cid] = Connection(cid, kind, entry["provider"], "config", config)
        return out

    # -- lookups -------------------------------------------------------------------------
    def ids(self) -> list[str]:
        return [LOCAL, *sorted({*self._configured, *(c.id for c in self.table.all())})]

    def get(self, cid: str) -> Connection:
        if cid == LOCAL:
            return Connection(LOCAL, "stores", self.settings.store, "builtin", None)
        found = self._configured.get(cid)
        if found is not None:
            return found
        stored = self.table.get(cid) if isinstance(cid, str) else None
        if stored is None:
            raise ConnectionNotFound(f"Unknown service '{cid}' (known: "
                                     f"{', '.join(self.ids())})")
        config = registry.config(stored.kind, stored.provider,
                                 {**stored.options, **stored.secrets})
        return Connection(stored.id, stored.kind, stored.provider, "api", config,
                          stored.created_at)

    def all(self) -> list[Connection]:
        out = []
        for cid in self.ids():
            try:
                out.append(self.get(cid))
            except RaglineError as exc:  # a stored plugin that no longer loads: listed as such
                log.warning("connection %s cannot be read: %s", cid, exc.message)
        return out

    def embedder(self, cid: str) -> tuple[str, ProviderConfig] | None:
        """The provider and config of an embedder connection (for ``embed.provider``)."""
        try:
            conn = self.get(cid)
        except RaglineError:
            return None
        if conn.kind != "embedders" or conn.config is None:
            return None
        return conn.provider, conn.config

    def instance(self, cid: str) -> Any:
        """The connection's provider, built on first use."""
        conn = self.get(cid)
        if conn.config is None:
            return self.store
        with self._lock:
            inst = self._instances.get(cid)
            if inst is None:
                inst = registry.get(conn.kind, conn.provider)(conn.config)
                self._instances[cid] = inst
            return inst

    # -- admin ---------------------------------------------------------------------------
    def add(self, cid: str, provider: str, options: dict[str, Any],
            kind: str = "stores") -> Connection:
        check_id(cid)
        if kind == "embedders" and registry.has("embedders", cid):
            raise InvalidInput(f"Connection id '{cid}' is an embedder provider's name: "
                               "choose another")
        if cid == LOCAL or cid in self._configured:
            raise InvalidInput(f"Connection '{cid}' is defined by the server's configuration "
                               "and cannot be replaced over the API")
        config = validate(kind, provider, options)
        secrets = set(secret_fields(type(config)))
        given = {k: v for k, v in options.items()}
        self.table.add(cid, kind, provider,
                       {k: v for k, v in given.items() if k not in secrets},
                       {k: v for k, v in given.items() if k in secrets})
        log.info("connection %s added (%s provider %s)", cid, kind, provider)
        return self.get(cid)

    def delete(self, cid: str) -> None:
        self.get(cid)  # 404 listing the known ones
        if cid == LOCAL or cid in self._configured:
            raise InvalidInput(f"Connection '{cid}' is defined by the server's configuration "
                               "and cannot be deleted over the API")
        self.table.delete(cid)
        with self._lock:
            inst = self._instances.pop(cid, None)
        _close(inst)
        log.info("connection %s deleted", cid)

    # -- health --------------------------------------------------------------------------
    def health(self, cid: str) -> Health:
        return checked_health(self.instance(cid))

    @staticmethod
    def test(provider: str, options: dict[str, Any], kind: str = "stores") -> Health:
        """Validate a config and try it (build, health, close) without saving anything."""
        config = validate(kind, provider, options)
        try:
            inst = registry.get(kind, provider)(config)
        except RaglineError as exc:
            return Health.now("down", error=exc.message)
        except Exception as exc:  # the kind of failure only: options may hold secrets
            return Health.now("down", error=f"could not connect ({type(exc).__name__})")
        try:
            return checked_health(inst)
        finally:
            _close(inst)

    def close(self) -> None:
        with self._lock:
            instances, self._instances = list(self._instances.values()), {}
        for inst in instances:
            _close(inst)


def _close(inst: Any) -> None:
    close = getattr(inst, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # closing must not hide the error that led here
            log.exception("closing a connection failed")
