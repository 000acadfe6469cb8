"""The one place where errors become HTTP responses.

Bodies carry ``detail`` (what FastAPI clients and spec 000 expect) and
``error``/``message`` (what the hermitAI spec expects), so every client family
finds its field. Request-validation failures are 400, not FastAPI's 422, and
name the offending field.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ragline.errors import RaglineError, StoreError, TooManyRequests

log = logging.getLogger(__name__)


def error_body(status: int, code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"detail": message, "error": code, "message": message, **extra}


def internal_error(request: Request, exc: BaseException) -> JSONResponse:
    """A bug: the body carries an error id and nothing else; the log has the traceback
    under the same id, so an operator can find it and a client learns nothing internal."""
    error_id = uuid.uuid4().hex[:16]
    log.error("internal error %s on %s %s", error_id, request.method, request.url.path,
              exc_info=exc)
    return JSONResponse(error_body(500, "internal_error",
                                   f"Internal error (id {error_id}); the server log has "
                                   "the details", error_id=error_id), status_code=500)


def _describe(err: dict[str, Any]) -> str:
    loc = [str(p) for p in err.get("loc", ())]
    if loc and loc[0] in ("body", "query", "path", "header", "cookie"):
        loc = loc[1:]  # the location prefix only: a field may itself be named "query"
    field = ".".join(loc) or "body"
    if err.get("type") == "missing":
        return f"'{field}' is required"
    if err.get("type") == "json_invalid":
        return "request body is not valid JSON"
    return f"'{field}': {err.get('msg', 'invalid value')}"


def install(app: FastAPI) -> None:
    @app.exception_handler(RaglineError)
    async def _ragline(_: Request, exc: RaglineError) -> JSONResponse:
        if exc.status == 500:
            # every 500 carries an id that is also in the log; a store failure's own text
            # can name files, so it goes to the log only (issue 10)
            error_id = uuid.uuid4().hex[:16]
            log.error("%s %s: %s", exc.code, error_id, exc.message)
            message = exc.message
            if isinstance(exc, StoreError):
                message = f"Internal storage error (id {error_id}); the server log has the details"
            return JSONResponse(error_body(500, exc.code, message, error_id=error_id),
                                status_code=500)
        if exc.status > 500:
            log.error("%s: %s", exc.code, exc.message)
        headers = ({"Retry-After": str(exc.retry_after)}
                   if isinstance(exc, TooManyRequests) else None)
        return JSONResponse(error_body(exc.status, exc.code, exc.message), status_code=exc.status,
                            headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        message = "Invalid request: " + "; ".join(_describe(e) for e in errors)
        safe = [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")}
                for e in errors]
        return JSONResponse(error_body(400, "invalid_request", message, errors=safe),
                            status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_body(exc.status_code, code, str(exc.detail)),
                            status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return internal_error(request, exc)
