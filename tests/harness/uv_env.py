"""uv settings that reach the same package indexes as pip on this machine.

uv does not read pip.conf or PIP_* variables. CI machines (and offline mirrors) configure pip, so
the install test asks pip for its effective settings (`pip config list`) and hands them to uv as
UV_* variables, leaving any UV_* the caller set alone.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping

# pip's own precedence: environment variables, then the install command's section, then global.
_SCOPE_RANK = {":env:": 3, "install": 2, "global": 1}


def pip_settings(listing: str) -> dict[str, str]:
    """`pip config list` lines (scope.key='value') -> the effective value per key."""
    best: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        name, sep, raw = line.partition("=")
        if not sep or "." not in name:
            continue
        scope, _, key = name.strip().rpartition(".")
        rank = _SCOPE_RANK.get(scope, 0)
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip().strip("'\"")
        if rank >= best.get(key, (-1, ""))[0]:
            best[key] = (rank, str(value))
    return {key: value for key, (_, value) in best.items()}


def uv_env_from_pip_settings(settings: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """The UV_* (and SSL_CERT_FILE) variables matching pip's settings; the caller's own win."""
    out: dict[str, str] = {}
    extra = settings.get("extra-index-url", "").split()
    if settings.get("index-url"):
        out["UV_DEFAULT_INDEX"] = settings["index-url"]
    if extra:
        out["UV_INDEX"] = " ".join(extra)
        # pip takes the best version from all indexes; uv's default stops at the first index that has the package.
        out["UV_INDEX_STRATEGY"] = "unsafe-best-match"
    if settings.get("find-links"):
        out["UV_FIND_LINKS"] = ",".join(settings["find-links"].split())
    if settings.get("trusted-host"):
        out["UV_INSECURE_HOST"] = " ".join(settings["trusted-host"].split())
    if settings.get("cert"):
        out["SSL_CERT_FILE"] = settings["cert"]
    if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        out["UV_NO_INDEX"] = "1"
    return {name: value for name, value in out.items() if name not in env}


def uv_env_from_pip(env: Mapping[str, str], python: str = sys.executable) -> dict[str, str]:
    listing = subprocess.run([python, "-m", "pip", "config", "list"], env=dict(env), capture_output=True, text=True, timeout=60)
    return uv_env_from_pip_settings(pip_settings(listing.stdout), env)
