"""Tenants a read covers: the caller's own records and the shared corpus.

Records belong to one tenant. The reserved tenant ``*`` (:data:`SHARED`) holds
the shared corpus: what an admin publishes to every reader of a collection
(``X-Ragline-Tenant: *``). A read covers a :data:`TenantScope`:

* a ``str``: exactly that tenant's records (what writes, ingestion bookkeeping,
  verify and export use);
* a ``tuple`` of tenants: the records of any of them. A reader's scope is
  ``(tenant, "*")`` (:func:`read_scope`): its own records and the shared ones.

Stores turn a scope into their tenant condition (``tenant = t`` or
``tenant in (t, '*')``) on every call, so the check stays inside the store.
A record's id is unique within its tenant: a user's record may carry the id of a
shared one, and the two are different records. Listings, counts and searches
return both; a lookup by id returns the first tenant's of the scope that has one
(the caller's own before the shared one): :func:`first_by_id`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

SHARED = "*"

TenantScope = str | tuple[str, ...]


def tenants_of(scope: TenantScope) -> tuple[str, ...]:
    """The tenants a scope covers, in order of precedence, without repeats."""
    if isinstance(scope, str):
        return (scope,)
    return tuple(dict.fromkeys(scope))


def read_scope(tenant: str) -> TenantScope:
    """What a reader of ``tenant`` sees: its own records and the shared corpus."""
    return tenant if tenant == SHARED else (tenant, SHARED)


def own_tenant(scope: TenantScope) -> str:
    """The scope's first tenant: the one whose records the caller owns."""
    return tenants_of(scope)[0]


def is_shared(tenant: str | None) -> bool:
    return tenant == SHARED


class _HasIdTenant(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def tenant(self) -> str: ...


R = TypeVar("R", bound=_HasIdTenant)


def first_by_id(records: Iterable[R], ids: Sequence[str], scope: TenantScope) -> list[R]:
    """``records`` (any order, any of the scope's tenants) as a lookup by ``ids``
    answers: in the order of ``ids``, missing ones left out, one per id: the record of
    the earliest tenant of ``scope`` that has it."""
    rank = {t: i for i, t in enumerate(tenants_of(scope))}
    best: dict[str, R] = {}
    for r in records:
        if r.tenant not in rank:
            continue
        cur = best.get(r.id)
        if cur is None or rank[r.tenant] < rank[cur.tenant]:
            best[r.id] = r
    return [best[i] for i in dict.fromkeys(ids) if i in best]
