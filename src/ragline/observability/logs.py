"""Log set-up for the server and CLI: text for people, JSON lines for shippers.

Every record gets ``request_id`` (from :mod:`ragline.observability.context`; ``-``
outside a request) so one request can be followed through the access log, the
services and the providers. Uvicorn's own loggers are routed here too, and its
access log is replaced by ours (``ragline.access``), which knows the route
template and the request id.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from ragline.observability.context import current_request_id

# Attributes every LogRecord has; anything else was passed with extra= and is logged.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class RequestIdFilter(logging.Filter):
    """Stamps ``record.request_id`` (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", None):
            record.request_id = current_request_id() or "-"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, request_id, extras."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or current_request_id() or "-",
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in body and not key.startswith("_"):
                body[key] = value if isinstance(value, str | int | float | bool | None) else str(
                    value)
        if record.exc_info:
            body["exc"] = self.formatException(record.exc_info)
        return json.dumps(body, ensure_ascii=False)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def configure_logging(level: str = "info", fmt: str = "text", stream: Any = None) -> None:
    """(Re)configure the root logger; idempotent, so tests may call it repeatedly."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_ragline", False):
            root.removeHandler(old)
    handler._ragline = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    # uvicorn's loggers: no handlers of their own, into ours; its access log is ours.
    for name in ("uvicorn", "uvicorn.error"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
    logging.getLogger("uvicorn.access").disabled = True


def reset_logging() -> None:
    """Remove what :func:`configure_logging` installed (tests; embedding applications)."""
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_ragline", False):
            root.removeHandler(old)
    root.setLevel(logging.WARNING)
    logging.getLogger("uvicorn.access").disabled = False
