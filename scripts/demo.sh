#!/usr/bin/env bash
# Installs tars into ./.venv and starts tarsd in the foreground on the demo vault
# (examples/vault) with the local embedding model and SQLite. Ctrl-C stops it.
#
# The model (all-MiniLM-L6-v2, ~90 MB) is downloaded once into the user cache; if an
# offline copy sits beside the repo (../shared/models/all-MiniLM-L6-v2-int8) or
# TARS_MODEL_DIR points at one, that is used instead.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
tars_venv  # rebuilds a .venv made by another Python; says which Python is needed when none fits
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet .
offline="$(cd .. && pwd)/shared/models/all-MiniLM-L6-v2-int8"
if [ -z "${TARS_MODEL_DIR:-}" ] && [ -f "$offline/model.onnx" ]; then
    export TARS_MODEL_DIR="$offline"
fi
echo "tarsd starting on examples/vault; in another shell: .venv/bin/tarsctl status" >&2
exec .venv/bin/tarsd --vault examples/vault "$@"
