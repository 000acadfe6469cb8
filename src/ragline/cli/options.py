"""Options given before the sub-command (``ragline --config FILE ...``).

A module of its own so that every command sees them, also when the CLI runs
as ``python -m ragline.cli.main`` (where ``main`` is loaded twice: as
``__main__`` and as ``ragline.cli.main``).
"""

from __future__ import annotations

from pathlib import Path

config_file: Path | None = None
