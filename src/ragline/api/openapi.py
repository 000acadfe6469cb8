"""The OpenAPI document tells the truth about errors.

Every operation lists the error statuses ragline really sends, each with the one
error body of ``api/errors.py``; FastAPI's phantom 422 (request validation is a
400 here) is removed. Which statuses an operation can answer follows from what
it is: everything can be 400, 401 (unless public on purpose) and 503; routes with
a path parameter can be 404; writes can be 409 and 413; control-plane routes 403.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

PUBLIC = {"/health", "/version"}  # the webhook is authenticated by its signature: 401


class ErrorBody(BaseModel):
    """Every error ragline answers, whatever the status."""

    detail: str = Field(description="What went wrong, for people (spec 000 clients read it).")
    error: str = Field(description="A stable machine-readable code, e.g. 'collection_not_found'.")
    message: str = Field(description="Same as detail (per-user ingestion clients read it).")
    error_id: str | None = Field(None, description="On 500 only: the id under which the "
                                 "server logged the failure.")
    errors: list[dict[str, Any]] | None = Field(
        None, description="On request-validation 400s: each invalid field.")


DESCRIPTIONS = {
    "400": "Invalid input (the message names the field or the limit).",
    "401": "Missing, invalid or revoked API key.",
    "403": "The key's role does not allow this operation.",
    "404": "No such collection, document, job or source for this caller's tenant.",
    "409": "Conflict (already exists; concurrently emptied or deleted).",
    "413": "Too large (the message names the limit).",
    "502": "The service named by ?service= could not be reached.",
    "500": "A bug: the body carries an error id that is in the server log.",
    "503": "A needed model or service is not available (the message says which setting).",
}


def _statuses(path: str, method: str) -> list[str]:
    out = ["400", "500", "503"]
    if path not in PUBLIC:
        out.append("401")
    if "{" in path or path in ("/search", "/context", "/lesson"):
        out.append("404")
    if method in ("post", "put", "delete"):
        out += ["403", "409", "413"]
    if path.startswith("/collections"):  # ?service=: unknown id 404, unreachable 502
        out += ["404", "502"]
    if path.startswith("/api/keys") or (path.startswith("/collections") and method != "get"):
        out.append("403")
    return sorted(set(out))


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version,
                             description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components["ErrorBody"] = ErrorBody.model_json_schema(
            ref_template="#/components/schemas/{model}")
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        ref = {"$ref": "#/components/schemas/ErrorBody"}
        for path, ops in schema.get("paths", {}).items():
            for method, op in ops.items():
                responses = op.setdefault("responses", {})
                responses.pop("422", None)
                for status in _statuses(path, method):
                    responses.setdefault(status, {
                        "description": DESCRIPTIONS[status],
                        "content": {"application/json": {"schema": ref}}})
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
