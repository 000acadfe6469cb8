"""The connections door (``rl.connections``): the provider registry and named
connections (docs/providers.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ragline.core.principal import Principal
from ragline.doors.base import Door
from ragline.errors import InvalidInput
from ragline.providers.registry import registry
from ragline.settings import Settings
from ragline.wiring import Services


class ConnectionsDoor(Door):
    def __init__(self, services: Services, settings: Settings,
                 dropped: Callable[[str], None]) -> None:
        """``dropped``: called with a deleted connection's id (the root stops the
        connection's own root)."""
        super().__init__(services, settings)
        self._dropped = dropped

    def providers(self) -> dict[str, Any]:
        """Every provider by kind (capabilities, config schema) and the plugins that did not
        load, with the reason."""
        return self._sv.operations.providers()

    @staticmethod
    def provider_schema(name: str, kind: str | None = None) -> list[dict[str, Any]]:
        """The provider(s) called ``name`` (one per kind that has one), with schemas."""
        return registry.find(name, kind)

    def all(self, caller: Principal) -> list[dict[str, Any]]:
        """Every connection id (``local`` first); admins also see options (never secrets)."""
        return [c.view(full=caller.is_admin) for c in self._sv.connections.all()]

    def add(self, caller: Principal, cid: str, provider: str, options: dict[str, Any],
            kind: str = "stores") -> dict[str, Any]:
        self._access.require_admin(caller, "add connections")
        _network_options(caller, kind, provider, options)
        return self._sv.connections.add(cid, provider, options, kind).view(full=True)

    def delete(self, caller: Principal, cid: str) -> None:
        """The connection's root stops with it; its catalog stays (``connections/<id>/``
        or its schema), so the same id added again finds its collections."""
        self._access.require_admin(caller, "delete connections")
        self._sv.connections.delete(cid)
        self._dropped(cid)

    def test(self, caller: Principal, provider: str, options: dict[str, Any],
             kind: str = "stores") -> dict[str, Any]:
        """Validate a config and try it, saving nothing (400 names an invalid field)."""
        self._access.require_admin(caller, "test connections")
        _network_options(caller, kind, provider, options)
        return self._sv.connections.test(provider, options, kind).model_dump()

    def health(self, caller: Principal, cid: str) -> dict[str, Any]:
        """Admins see the details (the remote address among them); a user key the status
        only (issue 32 item 4)."""
        health = self._sv.connections.health(cid).model_dump()
        if not caller.is_admin:
            health["details"] = {}
            if health.get("error"):
                health["error"] = "the connection is not usable (an admin sees why)"
        return {"id": cid, **health}


def _network_options(caller: Principal, kind: str, provider: str,
                     options: Mapping[str, Any]) -> None:
    """Over the network a connection never names a place on this server's disk (an
    embedded store's directory is the operator's choice, made in the config file)."""
    if caller.local or not isinstance(options, Mapping):
        return
    fields = registry.get(kind, provider).Config.model_fields
    for name, info in fields.items():
        if name in options and ("path" in name or name == "location"
                                or "Path" in str(info.annotation)):
            raise InvalidInput(f"'options.{name}': a directory on the server is set in "
                               "the server's config file, not over the API")
