"""When the lines of Memory.md were written, from git, when the vault is kept in a git repository
(the Obsidian Git plugin, a hand-made repo): the memory review's dates for lines without a stamp
in a file it has not watched being written (tarsd/memory/review_detect.py, Context).

``git blame`` names the commit that brought each line's text into the file: the line was written by
that commit's time, and after the commit of the file before it, which did not hold it. A line not
committed yet has no date from git. Git is asked once a review, read-only, with nothing in the
repository's configuration run (no text conversion, no file-system monitor), and with a time limit:
a vault not in git, no git installed, a repository git refuses, or an answer it does not give in
time all leave the dates to the review's own looks.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

GIT_SECONDS = 10.0
_UNCOMMITTED = "0" * 40
_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")


def git_dates(vault: Path, rel: str, timeout: float = GIT_SECONDS) -> dict[int, tuple[float, float | None, str]]:
    """For each line of ``rel`` (0-based) that git knows: (written by, written after: None when the
    commit that brought it is the file's first, the line's text as git read it: a caller checks it is
    the line it read, the file may have been saved in between). Empty when the vault is not in git,
    or git cannot say; a Memory.md that is a link is not asked about (git knows the link, not its lines)."""
    git = shutil.which("git")
    path = vault / rel
    if git is None or path.is_symlink() or not path.is_file():
        return {}
    try:
        inside = _git(git, vault, ["rev-parse", "--is-inside-work-tree"], timeout)
        if inside.strip() != "true":
            return {}
        times = {}
        for row in _git(git, vault, ["log", "--format=%H %ct", "--", rel], timeout).splitlines():
            sha, _, when = row.partition(" ")
            if when.strip().isdigit():
                times[sha] = float(when)
        # -M: a line moved within the file keeps the commit that wrote it (taken for new, it would look
        # newer than lines it is older than); -w: so does a line whose spaces changed.
        blame = _git(git, vault, ["blame", "--line-porcelain", "--no-textconv", "-M", "-w", "--", rel], timeout)
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError) as exc:
        log.info("memory review: no dates from git for %s: %s", rel, exc)
        return {}
    order = sorted(times.values())
    found: dict[int, tuple[float, float | None, str]] = {}
    for sha, line, text in _blamed(blame):
        if sha == _UNCOMMITTED or sha not in times:
            continue
        committed = times[sha]
        before = [t for t in order if t < committed]
        found[line] = (committed, before[-1] if before else None, text.removesuffix("\r"))
    return found


def _git(git: str, vault: Path, args: list[str], timeout: float) -> str:
    done = subprocess.run(
        [git, *_SAFE, "-C", str(vault), *args],
        capture_output=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        env=_environment(),
    )
    if done.returncode != 0:
        raise subprocess.SubprocessError(done.stderr.decode("utf-8", "replace").strip()[:200] or f"git {args[0]} failed")
    return done.stdout.decode("utf-8", "replace")


def _environment() -> dict[str, str]:
    """tarsd's environment without GIT_* (a GIT_DIR set for another purpose would point git elsewhere)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def _blamed(porcelain: str):
    """(commit, 0-based line in the file now, its text) of each line of ``git blame --line-porcelain``."""
    header: tuple[str, int] | None = None
    for row in porcelain.split("\n"):
        if header is None:
            parts = row.split(" ")
            if len(parts) >= 3 and len(parts[0]) == 40 and parts[2].isdigit():
                header = (parts[0], int(parts[2]) - 1)
        elif row.startswith("\t"):  # the line's text ends its entry
            yield header[0], header[1], row[1:]
            header = None
