"""The README's library example runs as written (local ONNX embedder, scripted model)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

README = Path(__file__).parents[2] / "README.md"


def test_readme_library_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Verbatim, in an empty namespace: no name is given to it (issue 33)."""
    text = README.read_text()
    block = re.search(r"<!-- readme-example:start -->\n```python\n(.*?)```", text, re.DOTALL)
    assert block, "README lost its library example"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its scratch directory goes here
    ns: dict[str, object] = {}
    exec(compile(block.group(1), "README.md", "exec"), ns)
    assert list(tmp_path.glob("*/data/catalog.sqlite3"))  # the example made its data there
    out = capsys.readouterr().out
    assert [h.metadata["source_path"] for h in ns["hits"]] == ["runbooks/cpu.md"]  # type: ignore[attr-defined,index]
    assert ns["chunks"][0].metadata["source_path"] == "runbooks/cpu.md"  # type: ignore[attr-defined,index]
    assert "High CPU usage" in ns["llm"].calls[-1].prompt  # type: ignore[attr-defined]
    assert "CPU triage ['Run top'] ['runbooks/cpu.md'" in out
