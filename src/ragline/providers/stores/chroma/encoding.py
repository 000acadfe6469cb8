"""How ragline records and ``where`` filters are written in Chroma's terms.

Chroma's metadata model is close to ragline's but not equal, so a record's
metadata is stored twice: verbatim as JSON under ``rl:meta`` (reads give back
exactly what was written: ints stay ints, ``null`` stays ``null``, key order is
kept), and as *shadow keys* that make every ragline operator an exact Chroma
filter. Only scalar Chroma metadata is used, never Chroma's array values:

* Measured on chromadb 1.5.9 (in-process and ``chroma run`` alike): array values
  of a deleted collection's records reappear on records of a *later* collection
  (they are not deleted with the collection and are picked up by whichever new
  record reuses the row), and ``$in`` does not look inside arrays. ragline drops
  a collection on every "empty", so arrays would make filters match ghosts.
* ragline compares ``1`` and ``1.0`` as equal, never a boolean with a number and
  never a string with a number, and a list field matches when any element does.
  So each (field, value) pair becomes one key holding ``True``:
  ``s:<len>:<field>=<string>``, ``n:<len>:<field>=<float repr>``,
  ``b:<len>:<field>=true|false`` (the field's length makes the key unambiguous;
  strings over 64 characters are replaced by a SHA-256 digest). Equality is
  ``{key: True}``; negated equality is ``{key: {"$ne": True}}``, which in Chroma
  also matches records without the key, as the reference semantics want.
* Range operators match when *any* number of the field satisfies them; the
  smallest and largest are stored as ``lo:<len>:<field>`` and
  ``hi:<len>:<field>``: ``any > v`` is ``hi > v`` and ``any < v`` is ``lo < v``,
  exactly. A negated range is ``hi <= v`` *or* "the field has no number", which is
  ``{N:<len>:<field>: {"$ne": True}}``.
* Chroma's ``upsert`` *merges* metadata into an existing record (measured), so the
  store clears the previous version's keys (``None``) in the same write.

Every ragline operator therefore maps (``$eq $ne $gt $gte $lt $lte $in $nin
$contains $not $and $or``, nested to any depth); :data:`SUPPORTED_OPERATORS`
lists them, and :func:`to_where` refuses a node it does not know with an
``InvalidInput`` that names it. Numbers compare as 64-bit floats (integers
beyond 2**53 lose precision, as in the Qdrant Edge store). Negations are pushed
down to the leaves (De Morgan), since Chroma has no ``$not`` of a sub-filter.

Chroma's local engine turns a flat ``$or`` of more than ~1000 terms into an SQL
expression deeper than SQLite allows, so long ``$and``/``$or`` lists are nested
as balanced trees of at most :data:`FAN_OUT` children.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from ragline.core.filters import And, Eq, In, Node, Not, Or, Range, Scalar
from ragline.core.types import Metadata
from ragline.errors import InvalidInput

TENANT = "rl:tenant"  # kept for reads; isolation is per collection (see provider)
DOC_ID = "rl:id"
META = "rl:meta"
FAN_OUT = 64
LONG_VALUE = 64

SUPPORTED_OPERATORS: frozenset[str] = frozenset({
    "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains", "$not",
    "$and", "$or",
})

_RANGE_KEY = {"$gt": "hi", "$gte": "hi", "$lt": "lo", "$lte": "lo"}
_NEGATED = {"$gt": "$lte", "$gte": "$lt", "$lt": "$gte", "$lte": "$gt"}


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _float(field: str, v: int | float) -> float:
    try:
        out = float(v) + 0.0  # + 0.0: -0.0 becomes 0.0 (they are equal)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise InvalidInput(
            f"Metadata field '{field}': the chroma store keeps numbers as 64-bit floats and "
            f"cannot hold {v!r}")
    return out


def _f(prefix: str, field: str) -> str:
    return f"{prefix}:{len(field)}:{field}"


def value_key(field: str, value: Scalar) -> str:
    """The shadow key saying "``field`` holds ``value``" (for any element of a list)."""
    if isinstance(value, bool):
        return f"{_f('b', field)}={'true' if value else 'false'}"
    if isinstance(value, str):
        if len(value) > LONG_VALUE:
            value = "#" + hashlib.sha256(value.encode("utf-8")).hexdigest()
        return f"{_f('s', field)}={value}"
    return f"{_f('n', field)}={_float(field, value)!r}"


def encode(tenant: str, doc_id: str, meta: Metadata) -> dict[str, Any]:
    """The Chroma metadata of one record (never empty: tenant and id are always there)."""
    out: dict[str, Any] = {
        TENANT: tenant, DOC_ID: doc_id,
        META: json.dumps(meta, ensure_ascii=False, separators=(",", ":")),
    }
    for field, value in meta.items():
        values = value if isinstance(value, list) else [value]
        numbers = [_float(field, v) for v in values
                   if isinstance(v, int | float) and not isinstance(v, bool)]
        for v in values:
            if v is not None:
                out[value_key(field, v)] = True
        if numbers:
            out[_f("lo", field)] = min(numbers)
            out[_f("hi", field)] = max(numbers)
            out[_f("N", field)] = True
    return out


def decode(meta: dict[str, Any] | None) -> tuple[str, str, Metadata]:
    """(tenant, document id, metadata) of a record read back from Chroma."""
    meta = meta or {}
    raw = meta.get(META)
    return (str(meta.get(TENANT, "")), str(meta.get(DOC_ID, "")),
            json.loads(raw) if isinstance(raw, str) else {})


def _eq(field: str, value: Scalar, negated: bool) -> dict[str, Any]:
    return {value_key(field, value): {"$ne": True} if negated else {"$eq": True}}


def _range(node: Range, negated: bool) -> dict[str, Any]:
    key = _f(_RANGE_KEY[node.op], node.field)
    if not negated:
        return {key: {node.op: float(node.value)}}
    return combine("$or", [{key: {_NEGATED[node.op]: float(node.value)}},
                           {_f("N", node.field): {"$ne": True}}])


def combine(op: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """``$and``/``$or`` of ``parts``: one part is itself (Chroma wants two or more),
    and long lists become balanced trees (SQLite caps expression depth)."""
    if len(parts) == 1:
        return parts[0]
    if len(parts) <= FAN_OUT:
        return {op: parts}
    step = -(-len(parts) // FAN_OUT)
    return combine(op, [combine(op, parts[i:i + step]) for i in range(0, len(parts), step)])


def to_where(node: Node, negated: bool = False) -> dict[str, Any]:
    """The Chroma ``where`` of a ragline filter; negations are pushed down to the leaves
    (De Morgan), since Chroma has no ``$not`` of a sub-filter."""
    if isinstance(node, Eq):
        return _eq(node.field, node.value, negated)
    if isinstance(node, In):
        # deduplicated by type too: 1, 1.0 and True are equal (and hash alike) in Python
        kinds = {(type(v) is bool, type(v) is str, v): v for v in node.values}
        leaves = [_eq(node.field, v, negated) for v in kinds.values()]
        return combine("$and" if negated else "$or", leaves)
    if isinstance(node, Range):
        return _range(node, negated)
    if isinstance(node, Not):
        return to_where(node.child, not negated)
    if isinstance(node, And | Or):
        conj = isinstance(node, And) != negated
        return combine("$and" if conj else "$or",
                       [to_where(c, negated) for c in node.children])
    raise InvalidInput(
        f"Invalid 'where' filter: the chroma store cannot express {type(node).__name__}")
