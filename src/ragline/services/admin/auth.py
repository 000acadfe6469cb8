"""Who may call: API keys, roles, tenants and the public-search exception.

Resolution, once per request (``rl.keys.authenticate``):

* auth off (``RAGLINE_AUTH=off``): the caller is the owner (admin, default tenant);
* a valid key: its role and tenant. An admin may act on another tenant by naming
  it (``X-Ragline-Tenant``), the shared corpus included (``*``: what every reader
  of a collection sees, see services/corpus/access.py); an admin naming none acts on every
  tenant for the operations defined on a whole collection (emptying it). A user key
  naming another tenant, ``*`` included, is refused (403); no key is ever created
  for ``*``;
* no key, on a route that reads and that the configuration makes public
  (``RAGLINE_PUBLIC_SEARCH_TENANT``): a public user of that tenant only;
* otherwise 401.

Validated keys are cached in memory for a few seconds (a key check must cost
well under 0.2 ms); revoking a key clears the cache, and one process owns the
data directory, so no other process can revoke behind our back.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from pathlib import Path

from ragline.catalog.keys import KeyRecord, hash_key
from ragline.catalog.tables import KeyRows
from ragline.core.principal import Principal, Role
from ragline.core.tenancy import SHARED
from ragline.errors import AuthenticationError, Forbidden, InvalidInput, NotFound
from ragline.settings import Settings

log = logging.getLogger(__name__)

CACHE_TTL_S = 5.0
TOUCH_EVERY_S = 60.0
ADMIN_KEY_FILE = "admin-key.txt"
TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
MISSING = ("Missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>' "
           "(create keys with 'ragline keys create')")
INVALID = "Invalid or revoked API key"


def check_tenant(name: str) -> str:
    if name == SHARED:
        raise InvalidInput("Tenant '*' is the shared corpus, not a tenant a key can "
                           "belong to: admins write to it with 'X-Ragline-Tenant: *'")
    if not TENANT_RE.match(name or ""):
        raise InvalidInput("Invalid tenant name: 1-64 characters, letters, digits, '.', '_', "
                           "'@' or '-', starting with a letter or digit")
    return name


class AuthService:
    def __init__(self, settings: Settings, keys: KeyRows) -> None:
        self.settings = settings
        self.keys = keys
        self._cache: dict[str, tuple[KeyRecord, float]] = {}
        self._touched: dict[str, float] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.settings.auth == "on"

    # -- keys ---------------------------------------------------------------------------
    def create_key(self, role: str, tenant: str, name: str = "") -> tuple[KeyRecord, str]:
        if role not in (Role.ADMIN, Role.USER):
            raise InvalidInput(f"Invalid role '{role}': use 'admin' or 'user'")
        rec, key = self.keys.create(role, check_tenant(tenant), name[:200])
        log.info("API key %s created (role %s, tenant %s)", rec.id, rec.role, rec.tenant)
        return rec, key

    def list_keys(self, tenant: str | None = None) -> list[KeyRecord]:
        return self.keys.list(tenant)

    def revoke(self, kid: str, tenant: str | None = None) -> KeyRecord:
        rec = self.keys.get(kid)
        if rec is None or (tenant is not None and rec.tenant != tenant):
            raise NotFound(f"API key '{kid}' not found")
        with self._lock:
            self._cache.clear()
        revoked = self.keys.revoke(kid)
        assert revoked is not None
        log.info("API key %s revoked", kid)
        return revoked

    def ensure_first_admin(self, data_dir: Path) -> str | None:
        """On the first start of a data directory with auth on: an admin key, written to a
        file only the owner can read. Returns the key (for the start-up banner) or None."""
        if not self.enabled or self.keys.count() > 0:
            return None
        _, key = self.create_key(Role.ADMIN, self.settings.default_tenant, "first admin")
        path = data_dir / ADMIN_KEY_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")
        os.chmod(path, 0o600)
        return key

    # -- requests -----------------------------------------------------------------------
    def _verify(self, key: str) -> KeyRecord | None:
        digest = hash_key(key)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(digest)
        if hit is not None and now - hit[1] < CACHE_TTL_S:
            rec: KeyRecord | None = hit[0]
        else:
            rec = self.keys.verify(key)
            if rec is not None:
                with self._lock:
                    if len(self._cache) > 10_000:
                        self._cache.clear()
                    self._cache[digest] = (rec, now)
        if rec is not None and now - self._touched.get(rec.id, -TOUCH_EVERY_S) >= TOUCH_EVERY_S:
            self._touched[rec.id] = now
            self.keys.touch(rec.id)
        return rec

    def known(self, key: str) -> bool:
        """A key validated within the cache's lifetime: answered from memory, with no
        catalog read or write (the request guard asks this on the event loop)."""
        with self._lock:
            hit = self._cache.get(hash_key(key))
        return hit is not None and time.monotonic() - hit[1] < CACHE_TTL_S

    def resolve(self, key: str | None, tenant: str | None, *, public_ok: bool,
                role: str | None = None) -> Principal:
        """The caller of a request (see the module docstring). ``role="user"``
        (``X-Ragline-Role``) makes an admin act as a user of the tenant it names: how a
        ragline that routes a user's request here (``?service=``) with an admin key
        keeps the caller's role on this side too."""
        if tenant is not None and tenant != SHARED:
            check_tenant(tenant)
        if role is not None and role not in (Role.ADMIN, Role.USER):
            raise InvalidInput("Invalid X-Ragline-Role: use 'user' (or 'admin', the key's own)")
        principal = self._resolve(key, tenant, public_ok=public_ok)
        if role == Role.USER and principal.is_admin:
            if principal.tenant == SHARED:
                raise Forbidden("The shared corpus '*' is written by admins only: a user "
                                "role cannot act as tenant '*'")
            return Principal(tenant=principal.tenant, role=Role.USER, key_id=principal.key_id,
                             name=principal.name)
        if role == Role.ADMIN and not principal.is_admin:
            raise Forbidden("A user key cannot act as an admin")
        return principal

    def _resolve(self, key: str | None, tenant: str | None, *, public_ok: bool) -> Principal:
        if not self.enabled:  # every network caller is an admin, but never "local"
            return Principal(tenant=tenant or self.settings.default_tenant, role=Role.ADMIN,
                             name="auth-off", all_tenants=tenant is None)
        if not key:
            public = self.settings.public_search_tenant
            if public_ok and public:
                if tenant is not None and tenant != public:
                    raise Forbidden("Public access reads only the public tenant")
                return Principal(tenant=public, role=Role.USER, name="public", public=True)
            raise AuthenticationError(MISSING)
        rec = self._verify(key)
        if rec is None:
            raise AuthenticationError(INVALID)
        if rec.role == Role.ADMIN:
            if tenant is None:
                return Principal(tenant=rec.tenant, role=Role.ADMIN, key_id=rec.id,
                                 name=rec.name, all_tenants=True)
            return Principal(tenant=tenant, role=Role.ADMIN, key_id=rec.id, name=rec.name)
        if tenant is not None and tenant != rec.tenant:
            raise Forbidden("A user key acts only inside its own tenant")
        return Principal(tenant=rec.tenant, role=Role.USER, key_id=rec.id, name=rec.name)
