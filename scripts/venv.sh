# Sourced by demo.sh and test.sh: find a Python tars supports and make sure ./.venv runs it.
#
# A .venv made by another Python (an old python3, a Python since removed, a first run that failed
# half-way) is rebuilt instead of failing again. PYTHON=/path/to/python3.12 picks the interpreter;
# otherwise the first of python3, python3.13, python3.12, python3.11 that is 3.11 to 3.13: the
# versions pyproject.toml's requires-python admits (CI tests 3.11 and 3.13).

# Prints "MAJOR.MINOR REAL-PATH" for an interpreter (the base interpreter for a venv's python).
_TARS_IDENTIFY='import os, sys; print("%d.%d" % sys.version_info[:2], os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable))'

tars_python() {
    local candidate path version seen=""
    local candidates=(python3 python3.13 python3.12 python3.11)
    if [ -n "${PYTHON:-}" ]; then
        candidates=("$PYTHON")
    fi
    for candidate in "${candidates[@]}"; do
        path="$(command -v "$candidate" 2>/dev/null)" || continue
        version="$("$path" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" || continue
        if "$path" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info < (3, 14))' 2>/dev/null; then
            echo "$path"
            return 0
        fi
        seen="$seen $candidate=$version"
    done
    {
        echo "tars needs Python 3.11, 3.12 or 3.13; ${PYTHON:+PYTHON=$PYTHON is not usable; }found:${seen:- none}."
        echo "  Debian 12 / Raspberry Pi OS Bookworm: sudo apt install python3 python3-venv (3.11)"
        echo "  macOS: brew install python@3.12, or uv python install 3.12"
        echo "  then run the script again; PYTHON=/path/to/python3.12 in front of it picks a Python"
    } >&2
    return 1
}

tars_venv() {
    local python want have
    python="$(tars_python)" || return 1
    want="$("$python" -c "$_TARS_IDENTIFY")"
    if [ -e .venv ] || [ -L .venv ]; then
        have="$(.venv/bin/python -c "$_TARS_IDENTIFY" 2>/dev/null)" || have=""
        if [ "$have" != "$want" ]; then
            echo "rebuilding .venv: it was made by ${have:-a Python that no longer runs}; tars now uses Python $want" >&2
            rm -rf .venv
        fi
    fi
    if [ ! -e .venv ]; then
        if ! "$python" -m venv .venv; then
            rm -rf .venv
            echo "cannot create .venv with $python; on Debian and Raspberry Pi OS: sudo apt install python3-venv" >&2
            return 1
        fi
    fi
}
