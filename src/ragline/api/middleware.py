"""Request guards that run before any route: Host names, simple requests, body size, NaN.

Each guard answers on its own (a short JSON error) without reading more of the
request than it needs, so a hostile client costs little (issue 10):

* **Host** — only the configured names (default: the bound address, ``localhost``
  and IP literals) are served, so a DNS-rebinding page, whose requests carry
  the attacker's host name, gets 421 instead of driving the API.
* **Simple requests** — a ``POST`` a browser may send cross-origin without a
  preflight (form or ``text/plain`` body, no custom header) is refused with 403
  unless it carries an API-key header (``Authorization`` or ``X-API-Key``) or a
  signed-webhook header; no web page can then plant content or change state.
* **Body size** — ``Content-Length`` is checked before reading, and the bytes
  are counted while reading (chunked bodies), against a per-path limit;
  413 names the limit.
* **Authentication before the body** — a request that carries a body is
  authenticated from its headers first; without a valid key it is answered 401
  at once, before a byte of the body is read (a client trickling a body without
  a key holds nothing: issue 32). The routes still resolve the caller in full.
* **NaN / Infinity** — Python's JSON parser accepts these literals, JSON does
  not; a JSON body containing one is answered 400 naming the field.
* **Unstorable text and nesting** — a lone surrogate or NUL in any string of a JSON
  body, the path or a query parameter, or a body nested deeper than
  ``max_json_depth``, is answered 400 naming the field (:mod:`ragline.api.json_guard`).
* **Large bodies off the event loop** — a JSON body of ``OFF_LOOP_BYTES`` or more
  is joined and parsed on a worker thread, so ``/health`` keeps answering during
  concurrent bulk writes (issue 32).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import orjson

from ragline.api.bulk_json import DOCUMENTS_PATH, read_documents_body
from ragline.api.deps import key_from_headers
from ragline.api.json_guard import check_json_body, check_target
from ragline.errors import PayloadTooLarge, RaglineError
from ragline.observability.memory import TRIM_AFTER_BYTES, release_freed_memory

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ragline.settings import Settings

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SIMPLE_CONTENT_TYPES = frozenset(
    {"application/x-www-form-urlencoded", "multipart/form-data", "text/plain", ""}
)
"""Content types a browser sends cross-origin without a CORS preflight."""

CREDENTIAL_HEADERS = frozenset({b"authorization", b"x-api-key", b"x-hub-signature-256"})
"""Headers a cross-origin page cannot add without a preflight (which CORS refuses)."""

OFF_LOOP_BYTES = 1024 * 1024
"""JSON bodies this large are joined and parsed on a worker thread (orjson and simdjson
hold the event loop ~3-4 ms per MB otherwise)."""


class KeyCheck:
    """Authentication from the headers alone, for the request guard (the facade's rules).

    ``authenticate(key)`` raises :class:`~ragline.errors.AuthenticationError` for a
    missing (where no public tenant is configured) or invalid key and may read the
    catalog, so it runs on a worker thread unless ``known(key)`` says from memory that
    the key was valid moments ago."""

    def __init__(self, authenticate: Callable[[str | None], object],
                 known: Callable[[str], bool]) -> None:
        self.authenticate = authenticate
        self.known = known


@dataclass
class GuardConfig:
    allowed_hosts: list[str] | None = None
    """Host names served; ``None``: IP literals, ``localhost`` and ``bound_host``."""
    bound_host: str = "127.0.0.1"
    require_credential_header: bool = True
    max_request_bytes: int = 64 * 1024 * 1024
    path_limits: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Exact path -> (limit, setting name), for bodies with their own limit."""
    max_json_depth: int = 64
    large_body_slots: int = 2
    """Requests with a body of ``OFF_LOOP_BYTES`` or more served at once; the others wait
    (costing nothing) so small requests such as ``/health`` always find a worker thread."""
    keys: KeyCheck | None = None
    """Authenticate requests with a body before reading it; ``None``: auth is off."""
    signed_paths: frozenset[str] = frozenset()
    """Paths authenticated by a signature over the body (the webhook), not by a key."""


def _json_error(status: int, code: str, message: str) -> bytes:
    return json.dumps({"detail": message, "error": code, "message": message}).encode()


def _has_body(headers: dict[bytes, bytes]) -> bool:
    declared = headers.get(b"content-length", b"0").strip()
    return b"transfer-encoding" in headers or not declared.isdigit() or int(declared) > 0


async def _respond(send: Send, status: int, code: str, message: str,
                   headers: list[tuple[bytes, bytes]] | None = None, *,
                   close: bool = True) -> None:
    """Answer at once; ``close=False`` keeps a keep-alive connection (the body was read)."""
    body = _json_error(status, code, message)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            *([(b"connection", b"close")] if close else []),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def host_allowed(host_header: str, cfg: GuardConfig) -> bool:
    """Is the Host header (``name[:port]``) one this server answers to?"""
    host = host_header.strip().lower()
    if host.startswith("["):  # [v6]:port
        host = host[1:host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    host = host.rstrip(".")
    if cfg.allowed_hosts is not None:
        return "*" in cfg.allowed_hosts or any(
            host == h.lower() or (h.startswith("*.") and host.endswith(h[1:].lower()))
            for h in cfg.allowed_hosts)
    if host in ("localhost", cfg.bound_host.lower()) or host.endswith(".localhost"):
        return True
    try:  # an IP literal cannot be rebound by DNS
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _json_like(ctype: str, headers: dict[bytes, bytes]) -> bool:
    """A body FastAPI reads as JSON: ``application/json``, ``application/*+json``, or a
    body sent without a content type (issue 32: that one skipped the checks)."""
    if ctype == "application/json" or (ctype.startswith("application/")
                                       and ctype.endswith("+json")):
        return True
    return ctype == "" and (headers.get(b"content-length", b"0") != b"0"
                            or b"transfer-encoding" in headers)


class _Constant:
    """Stands in for a NaN/Infinity literal while the body is searched for it."""

    def __init__(self, text: str) -> None:
        self.text = text


_BIG_EXPONENT = re.compile(rb"\d[eE]\+?\d{3}")

TRIM_QUIET_S = 1.0
"""Seconds without a large JSON body starting or ending before the heap is trimmed."""

PARSED_JSON = "ragline.parsed_json"
"""Scope key holding orjson's reading of a JSON body that passed the guard, for
:mod:`ragline.api.fast_json`. orjson parses a batch of 1,000 384-d documents in ~28 ms;
the regex scan and stdlib parse it replaces cost ~4x that, on the event loop. Bodies
orjson refuses (the NaN/Infinity this guard names, invalid JSON) take the exact
slow path of :func:`find_constant`."""


RAW_BODY = "ragline.raw_body"
"""Scope key holding the body the guard read, for :mod:`ragline.api.fast_json`: FastAPI
reads a body before parsing it, and starlette joins the replayed body with a final
empty chunk, a copy of the whole body on the event loop (~30 ms for 60 MB)."""


def _parse_float(text: str) -> float | _Constant:
    value = float(text)
    return _Constant(f"{text} (beyond the float range)") if math.isinf(value) else value


def find_constant(body: bytes) -> tuple[str, str] | None:
    """(field path, literal) of the first NaN/Infinity literal in a JSON body, if any.

    ``1e400`` is no literal but Python parses it to infinity, so it counts too.
    """
    if b"NaN" not in body and b"Infinity" not in body and not _BIG_EXPONENT.search(body):
        return None  # the common case costs two substring searches and one regex scan
    try:
        doc = json.loads(body, parse_constant=_Constant, parse_float=_parse_float)
    except (ValueError, RecursionError):
        return None  # invalid JSON: the route's parser reports it
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, _Constant):
            return path or "body", value.text
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}.{i}" if path else str(i), v) for i, v in enumerate(value))
    return None


_WIDE = float(2**63)


def wide_float(doc: Any) -> bool:
    """Any integral float of magnitude >= 2**63 (what a wide integer literal becomes
    in orjson) outside ``embedding`` arrays."""
    stack = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(v for k, v in value.items() if k != "embedding")
        elif isinstance(value, list):
            stack.extend(value)
        elif type(value) is float and abs(value) >= _WIDE and value.is_integer():
            return True
    return False


def _read_json(chunks: list[bytes], bulk_path: bool, max_depth: int,
               ) -> tuple[bytes, Any, tuple[str, str] | None, str | None]:
    """(body, orjson's reading or ``None``, the NaN/Infinity literal to name or ``None``,
    the unstorable text or nesting to refuse or ``None``: :mod:`ragline.api.json_guard`).

    A bulk write's vectors are read straight into a matrix (api/bulk_json); orjson
    refuses NaN/Infinity and numbers beyond the float range itself, and only a body it
    refuses is searched for the literal to name (or is invalid JSON: the route's 400).
    Runs on a worker thread for large bodies, so all of it is kept off the event loop."""
    body = b"".join(chunks)
    bulk = read_documents_body(body) if bulk_path else None
    if bulk is not None:
        doc = bulk
    else:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            found = find_constant(body)
            return body, None, found, (None if found is not None
                                       else check_json_body(body, None, max_depth))
    if wide_float(doc):  # orjson read an integer beyond 64 bits as a float: the int64
        doc = json.loads(body)  # check must see the integer the standard library reads
    return body, doc, None, check_json_body(body, doc, max_depth)


class RequestGuard:
    """Pure ASGI middleware applying the guards above (see the module docstring)."""

    def __init__(self, app: ASGIApp, config: GuardConfig) -> None:
        self.app = app
        self.cfg = config
        self._large_in_flight = 0  # large JSON bodies being served (event loop only)
        self._heavy = asyncio.Semaphore(config.large_body_slots)
        self._large_seq = 0  # bumped at each start and end of one: a pending trim is stale

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if not host_allowed(headers.get(b"host", b"").decode("latin-1"), self.cfg):
            await _respond(send, 421, "host_not_allowed",
                           "Host name not allowed (setting allowed_hosts)")
            return
        bad_target = check_target(scope.get("path", ""), scope.get("query_string", b""))
        if bad_target is not None:
            await _respond(send, 400, "invalid_request", bad_target,
                           close=headers.get(b"content-length", b"0") != b"0"
                           or b"transfer-encoding" in headers)
            return
        method = scope.get("method", "GET")
        ctype = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
        if (method == "POST" and self.cfg.require_credential_header
                and ctype in SIMPLE_CONTENT_TYPES
                and not any(h in headers for h in CREDENTIAL_HEADERS)):
            await _respond(send, 403, "credential_header_required",
                           "State-changing requests with a form or text body must carry an "
                           "Authorization or X-API-Key header (setting "
                           "require_credential_header)")
            return
        limit, name = self.cfg.path_limits.get(
            scope.get("path", ""), (self.cfg.max_request_bytes, "max_request_bytes"))
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await _respond(send, 413, "payload_too_large",
                           f"Request body too large: {int(declared)} bytes (limit {limit} "
                           f"bytes, setting {name})")
            return
        if (self.cfg.keys is not None and _has_body(headers)
                and scope.get("path", "") not in self.cfg.signed_paths):
            refused = await self._authenticate(self.cfg.keys, headers)
            if refused is not None:
                await _respond(send, refused.status, refused.code, refused.message,
                               [(b"www-authenticate", b"Bearer")])
                return
        if _json_like(ctype, headers) and method in ("POST", "PUT", "PATCH", "DELETE"):
            await self._json(scope, receive, send, limit, name)
            return
        seen = [0]
        counting = self._counting(receive, limit, name, seen)
        if declared.isdigit() and int(declared) >= OFF_LOOP_BYTES:
            async with self._heavy:
                await self.app(scope, counting, send)
        else:
            await self.app(scope, counting, send)
        if seen[0] >= TRIM_AFTER_BYTES:  # an upload: parsed, ingested, freed
            await anyio.to_thread.run_sync(release_freed_memory)

    @staticmethod
    async def _authenticate(keys: KeyCheck, headers: dict[bytes, bytes]) -> RaglineError | None:
        """The error that refuses this request from its headers alone, or ``None``."""
        try:
            key = key_from_headers({k.decode("latin-1"): v.decode("latin-1")
                                    for k, v in headers.items()
                                    if k in (b"authorization", b"x-api-key")})
            if key is None:  # missing: answered from the settings, no catalog read
                keys.authenticate(None)
            elif not keys.known(key):
                await anyio.to_thread.run_sync(keys.authenticate, key)
        except RaglineError as exc:
            if exc.status in (401, 403):
                return exc
        return None

    @staticmethod
    def _counting(receive: Receive, limit: int, name: str, seen: list[int]) -> Receive:
        async def wrapped() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > limit:  # the error handler answers 413
                    raise PayloadTooLarge(
                        f"Request body too large: more than {limit} bytes (setting {name})")
            return message

        return wrapped

    async def _json(self, scope: Scope, receive: Receive, send: Send, limit: int,
                    name: str) -> None:
        """Buffer a JSON body (within its limit), refuse NaN/Infinity, then replay it."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            part = message.get("body", b"")
            size += len(part)
            if size > limit:
                await _respond(send, 413, "payload_too_large",
                               f"Request body too large: more than {limit} bytes "
                               f"(setting {name})")
                del chunks
                await anyio.to_thread.run_sync(release_freed_memory)
                return
            chunks.append(part)
            if not message.get("more_body", False):
                break
        bulk_path = bool(scope.get("method") == "POST"
                         and DOCUMENTS_PATH.match(scope.get("path", "")))
        if size < OFF_LOOP_BYTES:
            await self._serve_json(scope, receive, send,
                                   _read_json(chunks, bulk_path, self.cfg.max_json_depth))
            return
        async with self._heavy:  # parsed on a worker thread, at most large_body_slots at once
            read = await anyio.to_thread.run_sync(_read_json, chunks, bulk_path,
                                                   self.cfg.max_json_depth)
            del chunks
            await self._serve_json(scope, receive, send, read)

    async def _serve_json(self, scope: Scope, receive: Receive, send: Send,
                          read: tuple[bytes, Any, tuple[str, str] | None, str | None]
                          ) -> None:
        body, parsed, found, problem = read
        del read
        if found is not None:
            path, literal = found
            await _respond(send, 400, "invalid_request",
                           f"Invalid request: '{path}' is {literal}, which is not a finite "
                           "number; send finite numbers only", close=False)
            return
        if problem is not None:  # unstorable text or nesting (issue 32)
            await _respond(send, 400, "invalid_request", problem, close=False)
            return
        if parsed is not None:
            scope[PARSED_JSON] = parsed
        scope[RAW_BODY] = body
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        large = len(body) >= TRIM_AFTER_BYTES
        if large:
            self._large_in_flight += 1
            self._large_seq += 1
        try:
            await self.app(scope, replay, send)
        finally:
            if large:
                self._large_in_flight -= 1
                self._large_seq += 1
        scope.pop(PARSED_JSON, None)  # a route that did not take it: free it before a trim
        scope.pop(RAW_BODY, None)
        if large:
            del body
            self._trim_when_quiet()

    def _trim_when_quiet(self) -> None:
        """Trim once large JSON bodies have stopped for :data:`TRIM_QUIET_S`.

        A trim after every bulk write cost ~18 ms per 1,000 384-d documents (measured:
        the trim walks the arenas, then the next request faults ~8,000 pages back in),
        only to hand back memory the next request of the stream took again at once. So
        the trim waits for a quiet moment: any large body starting or ending meanwhile
        makes the pending one stale, and the last one of a burst trims."""
        seq = self._large_seq
        loop = asyncio.get_running_loop()

        def due() -> None:
            if seq == self._large_seq and not self._large_in_flight:
                loop.run_in_executor(None, release_freed_memory)

        loop.call_later(TRIM_QUIET_S, due)


WEBHOOK_PATH = "/ingestion/webhook/github"
UPLOAD_PATH = "/api/rag/ingest/upload"
MULTIPART_SLACK = 64 * 1024


def install(app: FastAPI, settings: Settings) -> None:
    """Add CORS (only when origins are configured) and the request guard to ``app``."""
    if settings.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["authorization", "x-api-key", "content-type"])
    def authenticate(key: str | None) -> object:  # the facade is the app's, set at start
        return app.state.ragline.keys.authenticate(key, None, public_ok=True)

    def known(key: str) -> bool:
        return bool(app.state.ragline.keys.known(key))

    app.add_middleware(RequestGuard, config=GuardConfig(
        allowed_hosts=settings.allowed_hosts, bound_host=settings.host,
        require_credential_header=settings.require_credential_header,
        max_request_bytes=settings.max_request_bytes,
        max_json_depth=settings.max_json_depth,
        path_limits={
            WEBHOOK_PATH: (settings.webhook_max_bytes, "webhook_max_bytes"),
            UPLOAD_PATH: (settings.max_upload_bytes + MULTIPART_SLACK, "max_upload_bytes"),
        },
        large_body_slots=max(1, settings.worker_threads // 2),
        keys=KeyCheck(authenticate, known) if settings.auth == "on" else None,
        signed_paths=frozenset({WEBHOOK_PATH})))
