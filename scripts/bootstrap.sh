#!/usr/bin/env bash
# Create or update the virtual environment in .venv from requirements.txt.
# Re-installs only when requirements.txt changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
want=$(sha256sum requirements.txt | cut -d' ' -f1)
have=$(cat .venv/.requirements-sha 2>/dev/null || true)
if [ "$want" != "$have" ]; then
  echo "== installing requirements"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r requirements.txt
  echo "$want" > .venv/.requirements-sha
fi
