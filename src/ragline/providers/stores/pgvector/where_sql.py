"""Translation of the ``where`` AST to a parametrized SQL condition on JSONB metadata.

Every value (and every field name) travels as a bound parameter: field names are
keys inside JSON values or the right operand of ``->``, never SQL identifiers,
so no quoting of user input is needed at all. Semantics follow the reference
evaluator in :mod:`ragline.core.filter_eval`:

* equality is JSONB containment, ``metadata @> {"f": v}`` (scalar field) OR
  ``metadata @> {"f": [v]}`` (list field holding ``v``). JSONB compares numbers
  numerically (``1`` matches ``1.0``) and never equates ``true`` with ``1`` or
  ``"1"`` with ``1``, exactly like the reference; both forms use the GIN index;
* ranges run a constant JSON path over ``metadata -> f`` that only looks at
  numbers, list elements included (``lax $[*]`` iterates a list or the scalar);
* every condition is non-NULL (``COALESCE``), so ``NOT`` really negates: a
  negation also matches records where the field is missing, as in the reference.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from ragline.core.filters import And, Eq, In, Node, Not, Or, Range
from ragline.core.tenancy import TenantScope, tenants_of

_RANGE_PATH = {
    "$gt": 'lax $[*] ? (@.type() == "number" && @ > $v)',
    "$gte": 'lax $[*] ? (@.type() == "number" && @ >= $v)',
    "$lt": 'lax $[*] ? (@.type() == "number" && @ < $v)',
    "$lte": 'lax $[*] ? (@.type() == "number" && @ <= $v)',
}


class WhereSQL:
    """Builds one condition; its parameters are named ``w0, w1, ...`` so the same
    condition can appear several times in a statement (both hybrid legs) with one
    set of values."""

    def __init__(self, prefix: str = "w") -> None:
        self.prefix = prefix
        self.params: dict[str, Any] = {}

    def _param(self, value: Any) -> sql.Placeholder:
        name = f"{self.prefix}{len(self.params)}"
        self.params[name] = value
        return sql.Placeholder(name)

    def _contains_any(self, field: str, values: tuple[Any, ...]) -> sql.Composed:
        docs = [Jsonb({field: v}) for v in values] + [Jsonb({field: [v]}) for v in values]
        if len(docs) == 2:
            return sql.SQL("(metadata @> {} OR metadata @> {})").format(
                self._param(docs[0]), self._param(docs[1]))
        return sql.SQL("metadata @> ANY({}::jsonb[])").format(self._param(docs))

    def condition(self, node: Node) -> sql.Composed:
        if isinstance(node, Eq):
            return self._contains_any(node.field, (node.value,))
        if isinstance(node, In):
            return self._contains_any(node.field, node.values)
        if isinstance(node, Range):
            return sql.SQL("COALESCE(jsonb_path_exists(metadata -> {}, {}::jsonpath, {}), false)"
                           ).format(self._param(node.field), self._param(_RANGE_PATH[node.op]),
                                    self._param(Jsonb({"v": node.value})))
        if isinstance(node, Not):
            return sql.SQL("(NOT {})").format(self.condition(node.child))
        if isinstance(node, And | Or):
            glue = sql.SQL(" AND " if isinstance(node, And) else " OR ")
            return sql.SQL("({})").format(glue.join(self.condition(c) for c in node.children))
        raise TypeError(f"unknown filter node {node!r}")


def tenant_where(tenant: TenantScope, where: Node | None
                 ) -> tuple[sql.Composed, dict[str, Any]]:
    """``tenant = ... AND <where>``: the tenant condition every statement carries
    (``tenant = ANY(...)`` for a scope of several tenants: core/tenancy.py)."""
    w = WhereSQL()
    cond, value = tenant_condition(tenant)
    if where is not None:
        cond = sql.SQL("{} AND {}").format(cond, w.condition(where))
    return cond, {"tenant": value, **w.params}


def tenant_condition(tenant: TenantScope, column: str = "tenant"
                     ) -> tuple[sql.Composed, str | list[str]]:
    """The tenant condition on ``column`` with its ``%(tenant)s`` parameter's value."""
    tenants = tenants_of(tenant)
    if len(tenants) == 1:
        return sql.Composed([sql.SQL(column + " = %(tenant)s")]), tenants[0]
    return sql.Composed([sql.SQL(column + " = ANY(%(tenant)s)")]), list(tenants)
