"""``?service=ID``: collection and document requests sent to a named connection.

``local`` (or no ``service``) is this server. Two kinds of connection serve
collection requests (:meth:`RoutingService.target` tells which):

* ``forward``: a provider that can say where to send HTTP (``http_target()``:
  another ragline server) gets the request passed through: same method, path (the
  ``/api`` prefix dropped: every ragline version serves ``/collections``), query
  without ``service``, body and content type, with the connection's key and the
  caller's tenant (``X-Ragline-Tenant``) and role (``X-Ragline-Role: user`` for a
  user caller), so the other server applies the caller's rights, not the key's.
  Its status, body and content type come back unchanged, errors included; only a
  server that cannot be reached is our own 502.
* ``store``: a collection store (pgvector, a Qdrant or Chroma server) is served
  here, by a facade of its own on that store (``ragline/facade_routed.py``): the
  same use cases with the caller's tenant and role, the store's capabilities
  deciding what it can do (no BM25 on Chroma: sparse and hybrid are a 400).

An unknown id is a 404 listing the known ones; a connection that holds no
collections (an embedder connection, a store without capability
``collections``) is a 400.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import httpx

from ragline.core.principal import Principal
from ragline.errors import InvalidInput, ProviderError, RaglineError
from ragline.services.connections.connections import LOCAL, ConnectionService

log = logging.getLogger(__name__)

TENANT_HEADER = "X-Ragline-Tenant"
ROLE_HEADER = "X-Ragline-Role"
# what a response may carry back: the body's description, nothing about the other hop
KEEP_RESPONSE_HEADERS = ("content-type", "retry-after", "content-disposition")

# who serves a ?service= request: this server, another server (pass-through), a store here
Target = Literal["local", "forward", "store"]


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

    def target(self, service: str) -> Target:
        """Who serves ``?service=ID`` (see the module docstring); 404 for an unknown id,
        400 for a connection that holds no collections, 502 for a store that cannot be
        built (its server refused the connection)."""
        if service == LOCAL:
            return "local"
        conn = self.connections.get(service)
        if conn.kind != "stores":
            raise InvalidInput(f"Connection '{service}' is of kind '{conn.kind}' "
                               f"({conn.provider}): only store connections (kind "
                               "'stores') serve collection requests")
        try:
            inst = self.connections.instance(service)
        except RaglineError:
            raise
        except Exception as exc:  # the kind of failure only: options may hold secrets
            log.warning("service %s: store could not be built: %s", service,
                        type(exc).__name__)
            raise ProviderError(f"Service '{service}' could not be reached "
                                f"({type(exc).__name__})") from None
        if callable(getattr(inst, "http_target", None)):
            return "forward"
        capabilities = getattr(inst, "capabilities", None)
        if not callable(capabilities) or "collections" not in capabilities():
            raise InvalidInput(f"Connection '{service}' ({conn.provider}) cannot serve "
                               "collection requests: its provider has no capability "
                               "'collections'")
        if self.connections.settings.shared_catalog and "shared" not in capabilities():
            raise InvalidInput(f"Connection '{service}' ({conn.provider}) cannot serve "
                               "collection requests with catalog 'postgres': the catalog is "
                               "shared by many processes and this store is not (use "
                               "pgvector or qdrant)")
        return "store"

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
