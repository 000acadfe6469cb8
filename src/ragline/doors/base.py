"""What every door shares: the services it sits on and the one access policy."""

from __future__ import annotations

from ragline.services.corpus.access import AccessPolicy
from ragline.settings import Settings
from ragline.wiring import Services


class Door:
    def __init__(self, services: Services, settings: Settings) -> None:
        self._sv = services
        self._settings = settings

    @property
    def _access(self) -> AccessPolicy:
        """Who may read or change which record or collection: every use case asks it."""
        return self._sv.access

    def _existing(self, name: str | None) -> str:
        """The one default-collection rule (a missing one is a 404 naming the setting)."""
        return self._sv.search.existing_default(name)
