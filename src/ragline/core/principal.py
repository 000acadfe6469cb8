"""Who is calling: the principal every use case on the facade takes.

The HTTP layer resolves it once per request (from an API key, or the configured
public access); the CLI and library users act as the data directory's owner.
Services never see a raw tenant string chosen by a client: they get the
principal's ``tenant``, which the server itself decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    """``admin`` manages collections, keys and any tenant; ``user`` acts inside its tenant."""

    ADMIN = "admin"
    USER = "user"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller.

    ``tenant`` is the tenant every record read or written belongs to.
    ``all_tenants`` is set only for an admin that named no tenant: operations
    defined on a whole collection (emptying it) then act on every tenant.
    ``public`` marks a caller admitted without a key by the public-search setting.
    """

    tenant: str
    role: Role = Role.USER
    key_id: str | None = None
    name: str = ""
    all_tenants: bool = False
    public: bool = False
    local: bool = False  # the CLI or a library caller on this machine, not a network client

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    @classmethod
    def owner(cls, tenant: str) -> Principal:
        """The data directory's owner (CLI, library): an admin acting on ``tenant``."""
        return cls(tenant=tenant, role=Role.ADMIN, name="local", all_tenants=True, local=True)
