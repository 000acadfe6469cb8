"""The OpenAPI document tells the truth about errors.

Every operation lists the error statuses ragline really sends, each with the one
error body of ``api/errors.py``; FastAPI's phantom 422 (request validation is a
400 here) is removed. Which statuses an operation can answer follows from what
it is: everything can be 400, 421 (Host guard), 401 and 403 (unless public on purpose)
and 503; routes with a path parameter can be 404; writes can be 409 and 413; routes that
queue jobs or fetch can be 429 (with ``Retry-After``); writes that check free space 507;
routes that may call a hosted model 502. Success bodies are declared per route with
``schemas_out.ok`` (models and examples); path parameters get an example here.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

PUBLIC = {"/health", "/version"}  # the webhook is authenticated by its signature: 401
NO_KEY = {"/health", "/ingestion/webhook/github"}
"""Operations that take no API key (the webhook is authenticated by its HMAC signature)."""

SECURITY_SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer",
               "description": "Authorization: Bearer KEY. The first admin key is in "
               "data/admin-key.txt; `ragline keys create` or POST /api/keys makes more."},
    "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key",
               "description": "The same API key in an X-API-Key header."},
}
"""The two ways a key is sent (either one): declared so /docs has an Authorize button and
"Try it out" sends the key."""


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
    "403": "The key's role or tenant does not allow this (a user key naming another tenant in "
           "X-Ragline-Tenant; a control-plane operation with a user key); or a POST with a "
           "form or text body but no API-key header (setting require_credential_header).",
    "404": "No such collection, document, job or source for this caller's tenant.",
    "409": "Conflict (already exists; concurrently emptied or deleted).",
    "413": "Request body too large (the message names the limit and its setting).",
    "421": "The Host header is not one this server answers to (setting allowed_hosts): "
           "a DNS-rebinding guard.",
    "429": "Too busy: the ingestion queue, concurrent uploads or URL fetches are at their "
           "limit; retry after Retry-After seconds.",
    "500": "A bug: the body carries an error id that is in the server log.",
    "502": "An outside provider (hosted embedding API, chat model) failed after retries, or "
           "the server named by ?service= could not be reached.",
    "503": "A needed model or service is not available (the message says which setting).",
    "507": "Not enough free disk space to write (setting disk_reserve_bytes); reads go on.",
}

RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.",
                               "required": True, "schema": {"type": "integer"}}}

JOB_ROUTES = {"/ingestion/trigger", "/ingestion/jobs/{job_id}/rerun",
              "/ingestion/webhook/github", "/api/rag/ingest/upload", "/api/rag/ingest/url",
              "/api/rag/ingest/text"}
"""Operations that queue a job, take an upload slot or fetch a URL: they can answer 429,
and they check the disk before queuing (507)."""

DISK_WRITES = {("post", "/collections"), ("post", "/collections/{name}/documents"),
               ("delete", "/collections/{name}/documents/all")}
"""Other operations that check free space before the store is touched (services/diskspace)."""

PROVIDER_CALLS = {"/collections/{name}/search", "/search", "/collections/{name}/documents",
                  "/api/rag/ingest/upload", "/api/rag/ingest/url", "/api/rag/ingest/text",
                  "/api/chat", "/api/checklists"}
"""Operations that may call a hosted embedding API or chat model while the client waits."""

PARAM_EXAMPLES = {"name": "docs", "doc_id": "a", "chunk_id": "c8",
                  "parent_doc_id": "module-1/lesson-1",
                  "job_id": "97ab568c9b154ac5b34407c32280990d", "key_id": "d1c449346431",
                  "conversation_id": "c0ffee", "source_id": "chapter-3/topics",
                  "cid": "staging"}
"""An example for every path parameter (by name), so each operation shows a whole request."""


def _statuses(path: str, method: str) -> list[str]:
    out = ["400", "421", "500", "503"]  # the Host guard answers before any route
    if path not in PUBLIC:
        out += ["401", "403"]  # 403: a user key naming another tenant, whatever the route
    if "{" in path or path in ("/search", "/context", "/lesson", "/api/chat",
                               "/api/checklists"):  # these name a collection in the body
        out.append("404")
    if method in ("post", "put", "delete"):
        out += ["403", "413"] + ([] if path.startswith("/v1/") else ["409"])  # /v1 stores nothing
    if path.startswith("/collections"):  # ?service=: unknown id 404, unreachable 502
        out += ["404", "502"]
    if path in JOB_ROUTES:
        out += ["429", "507"]
    if (method, path) in DISK_WRITES:
        out.append("507")
    if path in PROVIDER_CALLS and method == "post":
        out.append("502")
    return sorted(set(out))


def _tidy_success(response: dict[str, Any]) -> None:
    """A 2xx declared with a model keeps only the model's ``$ref``: FastAPI merges it into
    the schema it inferred from the route's ``dict[str, Any]`` return annotation."""
    for media in response.get("content", {}).values():
        schema = media.get("schema")
        if isinstance(schema, dict) and "$ref" in schema:
            media["schema"] = {"$ref": schema["$ref"]}


def _api_models() -> dict[str, type[BaseModel]]:
    """The api layer's pydantic models by class name (the component names FastAPI uses)."""
    out: dict[str, type[BaseModel]] = {}
    stack: list[type[BaseModel]] = [BaseModel]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.startswith("ragline.api"):
            out[cls.__name__] = cls
    return out


def _restore_examples(schema: dict[str, Any]) -> None:
    """Put the models' own examples back, nulls included, and show each on its media types.

    FastAPI renders the document with ``exclude_none``, which strips every ``null``
    from examples too (a key's ``"last_used_at": null`` disappears), so an example
    would no longer match its own schema."""
    components = schema.get("components", {}).get("schemas", {})
    models = _api_models()
    for name, component in components.items():
        extra = models[name].model_config.get("json_schema_extra") if name in models else None
        if isinstance(extra, dict) and "examples" in extra:
            component["examples"] = extra["examples"]
    for ops in schema.get("paths", {}).values():
        for op in ops.values():
            bodies = [op.get("requestBody", {})] + [
                r for status, r in op.get("responses", {}).items() if status.startswith("2")]
            for body in bodies:
                for media in body.get("content", {}).values():
                    ref = media.get("schema", {}).get("$ref", "")
                    examples = components.get(ref.rsplit("/", 1)[-1], {}).get("examples")
                    if examples and "example" not in media:
                        media["example"] = examples[0]


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
                for status, response in responses.items():
                    if status.startswith("2"):
                        _tidy_success(response)
                for status in _statuses(path, method):
                    responses.setdefault(status, {
                        "description": DESCRIPTIONS[status],
                        "content": {"application/json": {"schema": ref}}})
                if "429" in responses:
                    responses["429"].setdefault("headers", RETRY_AFTER)
                for param in op.get("parameters", []):
                    if param.get("in") == "path" and param["name"] in PARAM_EXAMPLES:
                        param.setdefault("example", PARAM_EXAMPLES[param["name"]])
                op["security"] = [] if path in NO_KEY else [{n: []} for n in SECURITY_SCHEMES]
        schema["components"]["securitySchemes"] = SECURITY_SCHEMES
        _restore_examples(schema)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
