"""The request id of the work in progress, carried by a context variable.

A context variable follows the request into FastAPI's thread pool (Starlette
copies the context into ``run_in_threadpool``), so log lines written by
services and providers carry the id of the request that caused them.
"""

from __future__ import annotations

import secrets
from contextvars import ContextVar

request_id_var: ContextVar[str | None] = ContextVar("ragline_request_id", default=None)


def new_request_id() -> str:
    """16 hex characters: short enough to read, unique enough for one server's logs."""
    return secrets.token_hex(8)


def current_request_id() -> str | None:
    return request_id_var.get()
