"""The web console: static files served at ``/ui`` (no build step, no CDN).

The console is plain HTML, CSS and JavaScript shipped inside the package, so
``ragline serve`` is all a user needs. The files are public (they hold no
data); every API call the console makes carries the user's API key.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static" / "ui"
MOUNT_PATH = "/ui"


def install(app: FastAPI) -> None:
    """Serve the console at ``/ui/`` (``/ui`` redirects there)."""
    app.mount(MOUNT_PATH, StaticFiles(directory=STATIC_DIR, html=True), name="console")
