# Sourced by demo.sh and test.sh: find a Python tars supports and make sure a venv runs it
# (demo.sh: ./.venv-demo, a normal install; test.sh: ./.venv, an editable install with the test
# extras: two environments, so neither undoes the other's install).
#
# A venv made by another Python (an old python3, a Python since removed, a first run that failed
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

# tars_venv [DIR]: DIR (default .venv) is a venv of a supported Python, made or rebuilt as needed.
tars_venv() {
    local venv="${1:-.venv}" python want have
    python="$(tars_python)" || return 1
    want="$("$python" -c "$_TARS_IDENTIFY")"
    if [ -e "$venv" ] || [ -L "$venv" ]; then
        have="$("$venv/bin/python" -c "$_TARS_IDENTIFY" 2>/dev/null)" || have=""
        if [ "$have" != "$want" ]; then
            echo "rebuilding $venv: it was made by ${have:-a Python that no longer runs}; tars now uses Python $want" >&2
            rm -rf "$venv"
        fi
    fi
    if [ ! -e "$venv" ]; then
        if ! "$python" -m venv "$venv"; then
            rm -rf "$venv"
            echo "cannot create $venv with $python; on Debian and Raspberry Pi OS: sudo apt install python3-venv" >&2
            return 1
        fi
    fi
}

# tars_stamp DIR normal|editable: a hash of what an install of this checkout into the venv DIR
# depends on. The scripts keep it in DIR/.tars-installed after a successful install and skip pip
# while it still matches, so an unchanged checkout starts at once. Both kinds cover pyproject.toml
# (dependencies, entry points); a normal install (demo.sh) copies the code, so it also covers every
# file under tarsd/, tarsctl/, systemd/ and launchd/; an editable one (test.sh) runs the checkout's
# code in place and needs no reinstall for it. By content, not time: a git checkout that only
# touches files reinstalls nothing, and any edit does.
tars_stamp() {
    "$1/bin/python" - "$2" <<'PY'
import hashlib, os, sys
kind = sys.argv[1]
digest = hashlib.sha256(kind.encode())
names = ["pyproject.toml"]
if kind == "normal":
    for top in ("tarsd", "tarsctl", "systemd", "launchd"):
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            names += [os.path.join(folder, f) for f in files if not f.endswith(".pyc")]
for name in sorted(names):
    with open(name, "rb") as f:
        digest.update(name.encode() + b"\0" + hashlib.sha256(f.read()).digest())
print(digest.hexdigest())
PY
}
