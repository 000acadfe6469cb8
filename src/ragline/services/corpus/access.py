"""The access policy: who may read or change which record or collection.

One object every door consults (the facade's use cases, and through them the HTTP
routes, MCP, the console, the CLI and ``?service=`` routing), so a rule is changed
in one place:

* **roles**: collection management, keys, connections, backups, metrics, server
  directories and the workers are for admins (:meth:`AccessPolicy.require_admin`);
* **collections**: a collection is readable by every caller unless its metadata
  lists ``tenants``; then only those tenants (and admins) see it, and to anyone else
  it does not exist (404, never 403: its name is not disclosed)
  (:meth:`AccessPolicy.may_use`, :meth:`AccessPolicy.collection`);
* **records read**: a caller reads its own tenant's records and the shared corpus,
  the reserved tenant ``*`` (:meth:`AccessPolicy.read_scope`; the stores apply it as
  ``tenant in (caller, '*')``: core/tenancy.py). An admin naming ``*``
  (``X-Ragline-Tenant: *``) reads the shared corpus alone;
* **records written**: every write and delete acts in the caller's own tenant only
  (:meth:`AccessPolicy.write_tenant`). A user key's tenant is never ``*``, so a user
  key cannot change a shared record: a delete of one finds nothing in the caller's
  tenant (404, as for another tenant's record), and a write with a shared record's id
  makes the caller's own private record, which does not touch the shared one;
  only an admin acting as ``*`` writes or deletes shared records;
* **jobs and keys**: a caller sees its tenant's; an admin naming no tenant, every
  tenant's (:meth:`AccessPolicy.tenant_filter`).
"""

from __future__ import annotations

from ragline.core.principal import Principal
from ragline.core.tenancy import SHARED, TenantScope, read_scope
from ragline.core.types import CollectionInfo
from ragline.errors import CollectionNotFound, Forbidden
from ragline.services.corpus.collections import CollectionService

SHARED_WRITERS = ("The shared corpus (tenant '*') is written by admins only: send "
                  "'X-Ragline-Tenant: *' with an admin key")


class AccessPolicy:
    def __init__(self, collections: CollectionService) -> None:
        self.collections = collections

    # -- roles ----------------------------------------------------------------------------
    @staticmethod
    def require_admin(caller: Principal, what: str) -> None:
        if not caller.is_admin:
            raise Forbidden(f"Only an admin key can {what}")

    # -- collections ----------------------------------------------------------------------
    @staticmethod
    def may_use(caller: Principal, info: CollectionInfo) -> bool:
        """Collections are shared unless their metadata lists ``tenants``: then only those
        tenants (and admins) see them; to anyone else they do not exist. A ``tenants``
        value that is not a list (stored before it was checked) admits admins only."""
        allowed = info.metadata.get("tenants")
        if caller.is_admin or allowed is None:
            return True
        return isinstance(allowed, list) and caller.tenant in allowed

    def collection(self, caller: Principal, name: str,
                   message: str | None = None) -> CollectionInfo:
        """The collection ``name`` if the caller may use it; 404 otherwise (``message``:
        the one to answer with, for spec 000's routes that word it their way)."""
        info = (self.collections.get(name) if message is None
                else self.collections.get(name, message=message))
        if not self.may_use(caller, info):
            raise CollectionNotFound(name, message=message) if message else \
                CollectionNotFound(name)
        return info

    def may_use_existing(self, caller: Principal, name: str) -> bool:
        """False only for a collection that exists and the caller may not use (a missing
        one is the caller's to create, where the use case creates collections)."""
        info = self.collections.find(name)
        return info is None or self.may_use(caller, info)

    # -- records --------------------------------------------------------------------------
    @staticmethod
    def read_scope(caller: Principal) -> TenantScope:
        """The tenants whose records the caller reads: its own and the shared corpus."""
        return read_scope(caller.tenant)

    @staticmethod
    def write_tenant(caller: Principal) -> str:
        """The one tenant the caller's writes and deletes act in."""
        if caller.tenant == SHARED and not caller.is_admin:
            raise Forbidden(SHARED_WRITERS)
        return caller.tenant

    # -- jobs, keys ------------------------------------------------------------------------
    @staticmethod
    def tenant_filter(caller: Principal) -> str | None:
        """Jobs and keys of the caller's tenant; an admin naming no tenant: every one's."""
        return None if caller.all_tenants else caller.tenant
