#!/usr/bin/env bash
# Installs ragline and everything it needs into the virtualenv whose bin/ is $1.
# Kept separate from the Makefile so each step can say why it is there.
set -euo pipefail
BIN="$1"
PIP="$BIN/pip"

# The package itself with dev tools (tests, lint, types).
"$PIP" install -q -e ".[dev]"
