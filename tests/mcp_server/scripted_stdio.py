"""``ragline mcp`` with the scripted chat model, for the stdio ``ask`` tests.

The scripted model cannot be chosen by any setting (``ragline.testing``), so a
test that wants ``ask`` over stdio starts this module instead of ``ragline mcp``:
the same settings, facade and MCP server, with the model handed to the facade.

    python -m tests.mcp_server.scripted_stdio --data-dir DIR [--api-key KEY]

The model is ``ragline.testing.scripted_llm.citing_model()``: it answers
``Answer from: <titles>``, the titles of the documents the chat service put into
its prompt, so a test can see that the retrieved context reached the model.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ragline.api.mcp_server.auth import stdio_principal
from ragline.api.mcp_server.server import build_server
from ragline.facade import Ragline
from ragline.settings import Settings
from ragline.testing.scripted_llm import citing_model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--api-key", default=None)
    args = ap.parse_args()
    llm = citing_model()
    with Ragline(Settings(data_dir=args.data_dir, _env_file=None),  # type: ignore[call-arg]
                 llm=llm) as rl:
        build_server(lambda: rl, stdio_principal(rl, args.api_key)).run("stdio")


if __name__ == "__main__":
    main()
