#!/usr/bin/env bash
# Installs tars with its test extras into ./.venv and runs the whole test suite.
# The tests use the real embedding model: ../shared/models/all-MiniLM-L6-v2-int8 by default,
# or wherever TARS_MODEL_DIR points.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
tars_venv  # rebuilds a .venv made by another Python; says which Python is needed when none fits
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"
exec .venv/bin/python -m pytest "$@"
