"""``?service=ID``: collection and document requests sent to a named connection.

``local`` (or no ``service``) is this server. A connection whose provider can
say where to send HTTP (``http_target()``: another ragline server) gets the
request passed through: same method, path (the ``/api`` prefix dropped: every
ragline version serves ``/collections``), query without ``service``, body and
content type, with the connection's key and the caller's tenant
(``X-Ragline-Tenant``) and role (``X-Ragline-Role: user`` for a user caller), so
the other server applies the caller's rights, not the key's. Its status, body
and content type come back unchanged, errors included; only a server that
cannot be reached is our own 502.

Other store connections (a pgvector or Chroma server as a second store) are
listed and health-checked, but cannot be routed to yet: 400 says so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from ragline.core.principal import Principal
from ragline.errors import InvalidInput, ProviderError
from ragline.services.connections import LOCAL, ConnectionService

log = logging.getLogger(__name__)

TENANT_HEADER = "X-Ragline-Tenant"
ROLE_HEADER = "X-Ragline-Role"
# what a response may carry back: the body's description, nothing about the other hop
KEEP_RESPONSE_HEADERS = ("content-type", "retry-after", "content-disposition")


@dataclass(frozen=True)
class Forwarded:
    """The other server's answer, to be returned as it is."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Outgoing:
    """The request as received (what routing needs of it)."""

    method: str
    path: str
    query: Sequence[tuple[str, str]]
    body: bytes
    content_type: str | None = None
    request_id: str | None = None


class RoutingService:
    def __init__(self, connections: ConnectionService) -> None:
        self.connections = connections
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, bool], httpx.Client] = {}

    def is_remote(self, service: str) -> bool:
        """False for this server; True for a pass-through connection; an unknown id is a
        404 listing the known ones, a connection that cannot serve requests a 400."""
        if service == LOCAL:
            return False
        inst = self.connections.instance(service)
        if not callable(getattr(inst, "http_target", None)):
            conn = self.connections.get(service)
            raise InvalidInput(f"Connection '{service}' ({conn.provider}) cannot serve "
                               "collection requests: only 'local' and ragline servers "
                               "(provider 'ragline-remote') can be routed to")
        return True

    def _client(self, base_url: str, verify: bool) -> httpx.Client:
        """One connection pool per server, shared by every forwarded request. Synchronous
        (run in a worker thread): an async pool is bound to one event loop, and the
        facade serves several (the server's, the library's portal, test clients')."""
        key = (base_url, verify)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = httpx.Client(base_url=base_url, verify=verify, follow_redirects=False)
                self._clients[key] = client
            return client

    def forward(self, caller: Principal, service: str, req: Outgoing) -> Forwarded:
        target = self.connections.instance(service).http_target()
        headers = dict(target.headers)
        if not caller.all_tenants:  # an admin naming no tenant acts on all, there too
            headers[TENANT_HEADER] = caller.tenant
        if not caller.is_admin:
            headers[ROLE_HEADER] = "user"
        if req.content_type:
            headers["Content-Type"] = req.content_type
        if req.request_id:
            headers["X-Request-ID"] = req.request_id
        path = req.path.removeprefix("/api") if req.path.startswith("/api/") else req.path
        query: list[tuple[str, str | int | float | bool | None]] = [
            (k, v) for k, v in req.query if k != "service"]
        try:
            resp = self._client(target.base_url, target.verify).request(
                req.method, path, params=query, content=req.body or None, headers=headers,
                timeout=target.timeout)
        except httpx.HTTPError as exc:  # the kind of failure, never the URL or the key
            log.warning("service %s: %s %s failed: %s", service, req.method, path,
                        type(exc).__name__)
            raise ProviderError(f"Service '{service}' could not be reached "
                                f"({type(exc).__name__})") from None
        log.info("service %s: %s %s -> %d", service, req.method, path, resp.status_code)
        kept = {k: v for k, v in resp.headers.items() if k.lower() in KEEP_RESPONSE_HEADERS}
        return Forwarded(resp.status_code, kept, resp.content)

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()
