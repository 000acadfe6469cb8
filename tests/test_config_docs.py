"""docs/configuration.md is generated from Settings; this fails when they disagree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_configuration_reference_is_up_to_date() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_config_docs.py"),
                           "--check"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_every_setting_is_documented() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_config_docs
    finally:
        sys.path.pop(0)
    from ragline.settings import Settings

    text = (ROOT / "docs" / "configuration.md").read_text()
    for name, field in Settings.model_fields.items():
        assert f"| `{name}` |" in text
        assert field.description or name in gen_config_docs.FALLBACK, (
            f"setting '{name}' has no description: add description= in ragline/settings/")
