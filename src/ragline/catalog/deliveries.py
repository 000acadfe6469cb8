"""Webhook deliveries already handled, kept in the catalog for a window.

GitHub names every delivery (``X-GitHub-Delivery``, a GUID) and re-sends the
same id on a redelivery; an attacker who captured one signed body can replay
it as often as they like. Remembering the ids (persisted, so a restart does not
reopen the window) makes a replay a no-op (issue 10).
"""

from __future__ import annotations

import time

from ragline.catalog.sqlite import Catalog


class Deliveries:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog  # the table is created by the catalog's migrations

    def first_time(self, delivery_id: str, window_s: float) -> bool:
        """Record ``delivery_id``; False if it was already seen within the window."""
        now = time.time()
        with self.catalog.tx() as db:
            db.execute("DELETE FROM webhook_deliveries WHERE received_at < ?", (now - window_s,))
            seen = db.execute("SELECT 1 FROM webhook_deliveries WHERE delivery_id = ?",
                              (delivery_id,)).fetchone()
            if seen:
                return False
            db.execute("INSERT INTO webhook_deliveries (delivery_id, received_at) VALUES (?, ?)",
                       (delivery_id, now))
            return True

    def forget(self, delivery_id: str) -> None:
        """Let a delivery be retried (its handling failed before doing anything)."""
        with self.catalog.tx() as db:
            db.execute("DELETE FROM webhook_deliveries WHERE delivery_id = ?", (delivery_id,))
