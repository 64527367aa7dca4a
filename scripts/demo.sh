#!/usr/bin/env bash
# Installs tars into ./.venv-demo and starts tarsd in the foreground on a copy of the demo vault
# (examples/vault) with the local embedding model and SQLite. Ctrl-C stops it.
#
# .venv-demo is the demo's own: a normal install, as a user gets; scripts/test.sh keeps its editable
# install with the test extras in ./.venv. The install runs when the checkout changed since the last
# one (tars_stamp in scripts/venv.sh: pyproject.toml and the package files, by content); otherwise
# tarsd starts at once.
#
# The copy lives in ${XDG_CACHE_HOME:-~/.cache}/tars/demo-vault (TARS_DEMO_VAULT picks another
# place): made on the first run and kept, so what you remember or chat there stays out of the
# checkout. Delete it for a fresh copy.
#
# The model (all-MiniLM-L6-v2, ~90 MB) is downloaded once into the user cache; if an
# offline copy sits beside the repo (../shared/models/all-MiniLM-L6-v2-int8) or
# TARS_MODEL_DIR points at one, that is used instead.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh

say() { echo "demo: $*" >&2; }

venv=.venv-demo
# pip's defaults retry an unreachable index for minutes in silence (with --quiet): one retry and
# a short timeout make it fail fast, and the message below says which index it could not reach.
PIP_FAST=(--quiet --retries 1 --timeout 15)

say "checking the Python and ./$venv"
tars_venv "$venv" # rebuilds a venv made by another Python; says which Python is needed when none fits
stamp="$(tars_stamp "$venv" normal)"
if [ -x "$venv/bin/tarsd" ] && [ "$(cat "$venv/.tars-installed" 2>/dev/null)" = "$stamp" ]; then
    say "tars in $venv matches the checkout: nothing to install (a change to the code or pyproject.toml reinstalls)"
else
    rm -f "$venv/.tars-installed" # an install that fails half-way is tried again next time
    index="${PIP_INDEX_URL:-$("$venv/bin/python" -m pip config get global.index-url 2>/dev/null || echo https://pypi.org/simple)}"
    say "upgrading pip in $venv (from $index)"
    if ! "$venv/bin/python" -m pip install "${PIP_FAST[@]}" --upgrade pip; then
        say "could not upgrade pip (is $index reachable?); going on with $("$venv/bin/python" -m pip --version | cut -d' ' -f1-2)"
    fi
    say "installing tars and its dependencies into $venv (from $index; a minute or two the first time)"
    if ! "$venv/bin/python" -m pip install "${PIP_FAST[@]}" .; then
        say "pip could not install tars: the package index $index cannot be reached, or it lacks a package (pip's error is above)."
        say "connect to the internet, or point pip at a reachable index or mirror (PIP_INDEX_URL=URL), then run this again"
        exit 1
    fi
    echo "$stamp" >"$venv/.tars-installed"
fi

offline="$(cd .. && pwd)/shared/models/all-MiniLM-L6-v2-int8"
if [ -z "${TARS_MODEL_DIR:-}" ] && [ -f "$offline/model.onnx" ]; then
    export TARS_MODEL_DIR="$offline"
fi

vault="${TARS_DEMO_VAULT:-${XDG_CACHE_HOME:-$HOME/.cache}/tars/demo-vault}"
if [ ! -d "$vault" ]; then
    say "copying examples/vault to $vault (the demo never edits the checkout)"
    mkdir -p "$(dirname "$vault")"
    cp -R examples/vault "$vault.partial.$$"
    mv "$vault.partial.$$" "$vault"
else
    say "serving $vault, the copy of examples/vault from an earlier run (delete it for a fresh one)"
fi
say "tarsd starting on $vault; in another shell: $venv/bin/tarsctl status"
exec "$venv/bin/tarsd" --vault "$vault" "$@"
