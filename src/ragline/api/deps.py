"""FastAPI dependencies: the facade and the calling principal.

The principal is resolved once per request from the API key (``Authorization:
Bearer KEY`` or ``X-API-Key: KEY``) and the optional ``X-Ragline-Tenant`` header
(admins only); see ``services/admin/auth.py`` for the rules. ``Caller`` requires a key;
``Reader`` also admits the configured public-search tenant without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from fastapi import Depends, Request

from ragline.core.principal import Principal
from ragline.errors import AuthenticationError
from ragline.facade import Ragline

TENANT_HEADER = "x-ragline-tenant"
ROLE_HEADER = "x-ragline-role"
# request.state attribute: the facade ?service= chose (api/routing.ServiceRoute); absent:
# the app's
SERVED_BY = "served_by"


# async so FastAPI does not send these trivial lookups through its thread pool
async def get_ragline(request: Request) -> Ragline:
    """The facade that serves this request: the app's, or the one of the store
    connection that ``?service=`` named (set by ``api/routing.ServiceRoute`` before the
    route's dependencies run)."""
    rl: Ragline = getattr(request.state, SERVED_BY, None) or request.app.state.ragline
    return rl


def key_from_headers(headers: Mapping[str, str]) -> str | None:
    """The key a request carries (header names lower-cased); a credential in any other
    form is refused, not ignored (a client that meant to authenticate must not silently
    become a public reader)."""
    auth = headers.get("authorization")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
        raise AuthenticationError("Unsupported Authorization header: send 'Bearer <key>'")
    key = headers.get("x-api-key")
    return key.strip() if key and key.strip() else None


def api_key(request: Request) -> str | None:
    """The key a request carries (:func:`key_from_headers`)."""
    return key_from_headers(request.headers)


def _resolve(request: Request, public_ok: bool) -> Principal:
    rl: Ragline = request.app.state.ragline
    caller = rl.keys.authenticate(api_key(request), request.headers.get(TENANT_HEADER),
                             public_ok=public_ok, role=request.headers.get(ROLE_HEADER))
    request.state.principal = caller
    return caller


async def get_caller(request: Request) -> Principal:
    """An authenticated caller (401 without a valid key when auth is on)."""
    return _resolve(request, public_ok=False)


async def get_reader(request: Request) -> Principal:
    """A caller of a read that the configuration may make public for one tenant."""
    return _resolve(request, public_ok=True)


async def get_optional_caller(request: Request) -> Principal | None:
    """The caller of an endpoint open to anonymous callers (``/health``): None without a
    valid key while auth is on. A refused key is answered as anonymous, not 401, so a
    probe never fails on a stale key (and a remote connection learns the key was refused
    from ``/info``)."""
    rl: Ragline = request.app.state.ragline
    try:
        if rl.keys.enabled and api_key(request) is None:
            return None
        return _resolve(request, public_ok=False)
    except AuthenticationError:
        return None


RL = Annotated[Ragline, Depends(get_ragline)]
MaybeCaller = Annotated[Principal | None, Depends(get_optional_caller)]
Caller = Annotated[Principal, Depends(get_caller)]
Reader = Annotated[Principal, Depends(get_reader)]
