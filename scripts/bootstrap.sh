#!/usr/bin/env bash
# Create or update the virtual environment in .venv.
#   scripts/bootstrap.sh          runtime only (requirements.txt): make run, make serve
#   scripts/bootstrap.sh --dev    runtime + tests and tooling (requirements-dev.txt): make test, make lint
# Re-installs only when the requirements files changed since the last install
# of that kind (a dev install also covers the runtime one).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
kind=runtime
files=(requirements.txt)
if [ "${1:-}" = "--dev" ]; then
  kind=dev
  files=(requirements.txt requirements-dev.txt)
fi
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
want=$(cat "${files[@]}" | sha256sum | cut -d' ' -f1)
have_runtime=$(cat .venv/.requirements-sha 2>/dev/null || true)
have_dev=$(cat .venv/.requirements-dev-sha 2>/dev/null || true)
dev_want=$(cat requirements.txt requirements-dev.txt | sha256sum | cut -d' ' -f1)
if [ "$kind" = runtime ] && { [ "$want" = "$have_runtime" ] || [ "$dev_want" = "$have_dev" ]; }; then
  exit 0
fi
if [ "$kind" = dev ] && [ "$want" = "$have_dev" ]; then
  exit 0
fi
echo "== installing $kind requirements"
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -r "${files[-1]}"
if [ "$kind" = dev ]; then
  echo "$want" > .venv/.requirements-dev-sha
else
  echo "$want" > .venv/.requirements-sha
fi
