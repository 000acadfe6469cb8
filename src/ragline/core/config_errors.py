"""Configuration errors that name the field, never its value.

pydantic's own message repeats the input (``input_value='sk-live-…'``), so a
misspelt key next to an API key in ``RAGLINE_EMBEDDER_OPTIONS`` once put the
key into a 400 body (issue 10). Every place that reports a config error to a
person goes through :func:`describe_validation_error`.
"""

from __future__ import annotations

from pydantic import ValidationError


def describe_validation_error(exc: ValidationError) -> str:
    """``'field.sub': what is wrong`` per error, without the offending values."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False, include_context=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(config)"
        parts.append(f"'{loc}': {err.get('msg', 'invalid value')}")
    return "; ".join(parts) or "invalid configuration"
