"""Headless Chromium for end-to-end tests: Playwright driving the system browser.

Playwright's own browser download cannot run here (no network but the package
registries), so the tests drive Debian's ``chromium`` through
``executable_path``. When either piece is missing the tests skip and say which
one and how to install it (``scripts/install.sh`` installs both).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("RAGLINE_TEST_ARTIFACTS", REPO / "test-artifacts")) / "console"


def chromium_path() -> str:
    """The system Chromium, or a skip that says how to get it."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("headless browser tests need Debian's chromium: run `apt-get install chromium` "
                "as root (scripts/install.sh does this when it can)")


def playwright_or_skip() -> object:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("headless browser tests need the Python package playwright "
                    "(pip install -e '.[dev]')")
    return sync_playwright


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium (Playwright's ``Browser``), closed on exit."""
    exe = chromium_path()
    sync_playwright: Any = playwright_or_skip()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        yield b
        b.close()


@contextmanager
def desktop_page() -> Iterator[Any]:
    """A 1280x800 page in a fresh browser, waiting at most 20 s for anything."""
    with chromium() as b:
        p = b.new_page(viewport={"width": 1280, "height": 800})
        p.set_default_timeout(20_000)
        yield p
