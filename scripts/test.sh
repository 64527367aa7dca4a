#!/usr/bin/env bash
# Installs tars with its test extras into ./.venv (editable: the tests run the checkout's code) and
# runs the whole test suite; extra arguments go to pytest. scripts/demo.sh keeps its own ./.venv-demo.
# The tests use the real embedding model: ../shared/models/all-MiniLM-L6-v2-int8 by default,
# or wherever TARS_MODEL_DIR points.
#
# The install runs when pyproject.toml changed since the last one (tars_stamp in scripts/venv.sh);
# code changes need none. Progress: the test count first, then a line for each test file that took
# long (tests/harness/progress.py), besides pytest's dots.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh

say() { echo "test: $*" >&2; }

venv=.venv
say "checking the Python and ./$venv"
tars_venv "$venv" # rebuilds a venv made by another Python; says which Python is needed when none fits
stamp="$(tars_stamp "$venv" editable)"
if [ "$(cat "$venv/.tars-installed" 2>/dev/null)" = "$stamp" ]; then
    say "tars with its test extras is installed in $venv (editable; pyproject.toml unchanged): nothing to install"
else
    rm -f "$venv/.tars-installed" # an install that fails half-way is tried again next time
    say "upgrading pip in $venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    say "installing tars (editable) with its test extras into $venv (a minute or two the first time)"
    "$venv/bin/python" -m pip install --quiet -e ".[test]"
    echo "$stamp" >"$venv/.tars-installed"
fi
say "running the tests: $venv/bin/python -m pytest $*"
# Unbuffered: the dots and progress lines show as they come, also through a pipe or into a log.
PYTHONUNBUFFERED=1 exec "$venv/bin/python" -m pytest "$@"
