"""Entry point named by spec 000: ``python server.py [--cross-encoder ...]``.

Same options as ``ragline serve``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from ragline.cli.main import app  # noqa: E402

if __name__ == "__main__":
    app(["serve", *sys.argv[1:]])
