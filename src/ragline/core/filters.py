"""The ``where`` language: parsed and validated once into a small AST.

Stores translate the AST, never the raw JSON, so every store sees a filter that
is already known to be well formed and within limits. Semantics (shared with
the reference evaluator in :mod:`ragline.core.filter_eval`):

* ``{"f": v}`` is ``{"f": {"$eq": v}}``; several keys in one object are ANDed.
* ``$eq``/``$in`` match a list-valued field when any element matches;
  ``$contains`` is the explicit spelling of that for list fields.
* ``$ne``/``$nin``/``$not`` are negations: they also match records where the
  field is missing (Chroma and Qdrant agree on this).
* ``$gt $gte $lt $lte`` take numbers only and never match non-numeric values.
* Booleans are not numbers: ``{"f": 1}`` does not match ``true``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal, Union

from ragline.errors import FilterError

Scalar = Union[str, int, float, bool]
CompareOp = Literal["$gt", "$gte", "$lt", "$lte"]


@dataclass(frozen=True, slots=True)
class Eq:
    field: str
    value: Scalar


@dataclass(frozen=True, slots=True)
class In:
    field: str
    values: tuple[Scalar, ...]


@dataclass(frozen=True, slots=True)
class Range:
    field: str
    op: CompareOp
    value: float


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    child: Node


Node = Union[Eq, In, Range, And, Or, Not]

KEY_FORBIDDEN_CHARS = ('"', "\\")
"""Characters a metadata key cannot hold: Qdrant's JSON paths can quote any other
key (``metadata."og:title"``, ``metadata."a.b"``) but not these (measured)."""


def key_problem(key: object) -> str | None:
    """Why ``key`` cannot be a metadata field name, or None when it can (issue 10).

    The grammar is shared by writes, filters, ``metadata-values`` and ingestion,
    so a key is either stored *and* filterable, or refused before anything is
    written: any non-empty string not starting with ``$`` (operators) and
    without a double quote or backslash.
    """
    if not isinstance(key, str) or not key:
        return "must be a non-empty string"
    if key.startswith("$"):
        return "must not start with '$'"
    for ch in KEY_FORBIDDEN_CHARS:
        if ch in key:
            return f"must not contain {ch!r}"
    return None


_FIELD_OPS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains", "$not"}


@dataclass(frozen=True, slots=True)
class Limits:
    max_depth: int = 8
    max_conditions: int = 256
    max_in_values: int = 1024


class _Parser:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.conditions = 0

    def _count(self) -> None:
        self.conditions += 1
        if self.conditions > self.limits.max_conditions:
            raise FilterError(
                f"Invalid 'where' filter: more than {self.limits.max_conditions} conditions"
            )

    def filter(self, obj: Any, depth: int) -> Node:
        if depth > self.limits.max_depth:
            raise FilterError(
                f"Invalid 'where' filter: nested deeper than {self.limits.max_depth} levels"
            )
        if not isinstance(obj, dict):
            raise FilterError(
                f"Invalid 'where' filter: expected an object, got {_kind(obj)}"
            )
        if not obj:
            raise FilterError("Invalid 'where' filter: empty object")
        parts: list[Node] = []
        for key, value in obj.items():
            if key in ("$and", "$or"):
                if not isinstance(value, list) or not value:
                    raise FilterError(
                        f"Invalid 'where' filter: '{key}' needs a non-empty list of filters"
                    )
                children = tuple(self.filter(v, depth + 1) for v in value)
                parts.append(And(children) if key == "$and" else Or(children))
            elif key == "$not":
                parts.append(Not(self.filter(value, depth + 1)))
            elif key.startswith("$"):
                raise FilterError(f"Invalid 'where' filter: unknown operator '{key}'")
            else:
                parts.append(self.field(key, value, depth + 1))
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def field(self, name: str, spec: Any, depth: int) -> Node:
        problem = key_problem(name)
        if problem is not None:
            raise FilterError(f"Invalid 'where' filter: field name {name!r} {problem}")
        if depth > self.limits.max_depth:
            raise FilterError(
                f"Invalid 'where' filter: nested deeper than {self.limits.max_depth} levels"
            )
        if not isinstance(spec, dict):
            return self._eq(name, spec)
        if not spec:
            raise FilterError(f"Invalid 'where' filter: empty condition for field '{name}'")
        parts: list[Node] = []
        for op, value in spec.items():
            if op not in _FIELD_OPS:
                raise FilterError(
                    f"Invalid 'where' filter: unknown operator '{op}' on field '{name}'"
                )
            parts.append(self._op(name, op, value, depth))
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def _op(self, name: str, op: str, value: Any, depth: int) -> Node:
        if op in ("$eq", "$contains"):
            return self._eq(name, value, op)
        if op == "$ne":
            return Not(self._eq(name, value, op))
        if op in ("$in", "$nin"):
            node = self._in(name, op, value)
            return Not(node) if op == "$nin" else node
        if op == "$not":
            if not isinstance(value, dict):
                raise FilterError(
                    f"Invalid 'where' filter: '$not' on field '{name}' needs an operator object"
                )
            return Not(self.field(name, value, depth + 1))
        self._count()
        if not _is_number(value):
            raise FilterError(
                f"Invalid 'where' filter: '{op}' on field '{name}' needs a number, "
                f"got {_kind(value)}"
            )
        return Range(name, op, float(value))  # type: ignore[arg-type]

    def _eq(self, name: str, value: Any, op: str = "$eq") -> Eq:
        self._count()
        if not _is_scalar(value):
            raise FilterError(
                f"Invalid 'where' filter: '{op}' on field '{name}' needs a string, number "
                f"or boolean, got {_kind(value)}"
            )
        return Eq(name, value)

    def _in(self, name: str, op: str, value: Any) -> In:
        self._count()
        if not isinstance(value, list) or not value:
            raise FilterError(
                f"Invalid 'where' filter: '{op}' on field '{name}' needs a non-empty list"
            )
        if len(value) > self.limits.max_in_values:
            raise FilterError(
                f"Invalid 'where' filter: '{op}' on field '{name}' has more than "
                f"{self.limits.max_in_values} values"
            )
        for v in value:
            if not _is_scalar(v):
                raise FilterError(
                    f"Invalid 'where' filter: '{op}' on field '{name}' needs strings, numbers "
                    f"or booleans, got {_kind(v)}"
                )
        return In(name, tuple(value))


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _is_number(v: Any) -> bool:
    """Finite floats and integers that fit the 64-bit integers stores index.

    ``math.isfinite`` of a 400-digit integer raises OverflowError, so integers
    are range-checked first (issue 10).
    """
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return INT64_MIN <= v <= INT64_MAX
    return isinstance(v, float) and math.isfinite(v)


def _is_scalar(v: Any) -> bool:
    return isinstance(v, str | bool) or _is_number(v)


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN or an infinite number"
    if isinstance(v, int) and not INT64_MIN <= v <= INT64_MAX:
        return "an integer outside the 64-bit range"
    if isinstance(v, int | float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def parse_where(where: Any, limits: Limits | None = None) -> Node | None:
    """Validate a decoded ``where`` object; ``None`` or ``{}`` means no filter."""
    if where is None or where == {}:
        return None
    return _Parser(limits or Limits()).filter(where, 1)


def parse_where_json(raw: str | None, limits: Limits | None = None) -> Node | None:
    """Parse the ``where`` query-string parameter (JSON text)."""
    if raw is None or raw.strip() == "":
        return None
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        raise FilterError("Invalid 'where' filter: must be valid JSON") from None
    return parse_where(obj, limits)


def fields_of(node: Node | None) -> set[str]:
    """Every field a filter mentions (used to decide which payload indexes help)."""
    if node is None:
        return set()
    if isinstance(node, Eq | In | Range):
        return {node.field}
    if isinstance(node, Not):
        return fields_of(node.child)
    out: set[str] = set()
    for child in node.children:
        out |= fields_of(child)
    return out


def to_where(node: Node) -> dict[str, Any]:
    """The AST back as a ``where`` object that :func:`parse_where` reads into an equal AST
    (a store that is itself a ragline server sends filters on this way)."""
    if isinstance(node, Eq):
        return {node.field: {"$eq": node.value}}
    if isinstance(node, In):
        return {node.field: {"$in": list(node.values)}}
    if isinstance(node, Range):
        return {node.field: {node.op: node.value}}
    if isinstance(node, Not):
        return {"$not": to_where(node.child)}
    return {"$and" if isinstance(node, And) else "$or": [to_where(c) for c in node.children]}
