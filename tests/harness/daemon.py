"""Run a real tarsd subprocess on a temp vault and talk to it over its real socket."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from harness.cgroup import MemoryCgroup
from tarsctl.client import Client
from tarsctl.protocol import Search, Status

DEADLINE_SECONDS = 60.0


def child_pids(parent: int, marker: str) -> list[int]:
    """Pids of ``parent``'s child processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and marker in cmdline:
            found.append(int(entry))
    return found


def wait_for(predicate: Callable[[], object], what: str, deadline: float = DEADLINE_SECONDS, interval: float = 0.05):
    """Poll until predicate() is truthy; fail with `what` after the deadline. Never a fixed sleep."""
    end = time.monotonic() + deadline
    last_error = None
    while time.monotonic() < end:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # the daemon may not be up yet
            last_error = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {deadline:.0f} s waiting for {what}" + (f" (last error: {last_error})" if last_error else ""))


class TarsDaemon:
    def __init__(self, vault: Path, state: Path, model_dir: Path, embedder: str = "none", extra_env: dict[str, str] | None = None):
        self.vault = vault
        # Socket addresses are limited to ~104 bytes: keep them short, outside pytest's long tmp paths.
        self.run_dir = Path(tempfile.mkdtemp(prefix="tars-", dir="/tmp"))
        self.socket = Path((extra_env or {}).get("TARS_SOCKET") or self.run_dir / "tarsd.sock")
        config = state / "config.toml"
        config.touch()
        self.env = {
            **os.environ,
            "TARS_CONFIG": str(config),
            "TARS_SOCKET": str(self.socket),
            "TARS_DB": str(state / "index.sqlite3"),
            "TARS_MODEL_DIR": str(model_dir),
            "TARS_EMBEDDER": embedder,
            "TARS_DAEMON_DEBOUNCE_MS": "100",
            **(extra_env or {}),
        }
        self.log = state / "tarsd.log"
        self.process: subprocess.Popen | None = None

    def start(
        self,
        wait: bool = True,
        open_files: int | None = None,
        args: tuple[str, ...] = (),
        cgroup: MemoryCgroup | None = None,
        scanned: bool = True,
    ) -> TarsDaemon:
        """Start tarsd; ``wait``: until it answers on its socket, and with ``scanned`` also until its
        start-up scan of the vault is done; ``open_files`` sets its soft and hard limit on open files
        (ulimit -n); ``cgroup``: tarsd starts inside it."""

        command = [sys.executable, "-m", "tarsd.daemon.main", "--vault", str(self.vault), *args]
        setup = []
        if open_files is not None:
            setup.append(f"ulimit -n {open_files}")  # the soft and the hard limit
        if cgroup is not None:
            setup.append(f"echo $$ > {shlex.quote(str(cgroup.procs_file))}")
        if setup:
            # A shell that sets up, then becomes tarsd (the same pid); not a preexec_fn, which runs
            # Python between fork and exec in this threaded pytest worker and can deadlock there.
            command = ["sh", "-c", " && ".join(setup) + ' && exec "$@"', "sh", *command]
        with open(self.log, "ab") as log:  # the child has its own copy of the file
            self.process = subprocess.Popen(command, env=self.env, stdout=subprocess.DEVNULL, stderr=log)
        if wait:
            try:
                wait_for(lambda: self.ping() or self._died(), "tarsd to answer on its socket")
                assert self.process.poll() is None, f"tarsd exited early:\n{self.log.read_text()}"
                if scanned:
                    # tarsd answers before its first scan ends, and a search then may miss notes the test
                    # wrote before starting it (a flake under load): tests that want that window say so.
                    self.wait_scanned()
            except BaseException:
                # The caller never gets the daemon to stop: one that does not come up is not left running.
                self.kill()
                raise
        return self

    def wait_scanned(self, what: str = "the start-up scan", deadline: float = DEADLINE_SECONDS) -> None:
        wait_for(lambda: self.status().coverage.reconciled, what, deadline=deadline)

    def _died(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def ping(self) -> bool:
        try:
            with Client(self.socket, timeout=2):
                return True
        except Exception:
            return False

    def client(self) -> Client:
        return Client(self.socket, timeout=30).__enter__()

    def search(self, query: str, mode: str = "fts", **options) -> list[str]:
        with Client(self.socket, timeout=30) as client:
            reply = client.call(Search(id=1, query=query, mode=mode, limit=options.pop("limit", 50), **options))
        return [hit.path for hit in reply.results]

    def status(self):
        with Client(self.socket, timeout=30) as client:
            return client.call(Status(id=1))

    def tarsctl_command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "tarsctl", *args]  # what the installed command runs

    def tarsctl(self, *args: str, timeout: float = 60, input: str | None = None) -> subprocess.CompletedProcess:
        """tarsctl with these arguments against this daemon; ``input`` is its stdin (none: empty)."""
        return subprocess.run(self.tarsctl_command(*args), env=self.env, input=input, capture_output=True, text=True, timeout=timeout)

    def repl(self, lines: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
        """``tarsctl chat --repl`` typed these lines, one per line, on a pipe (not a terminal)."""
        return self.tarsctl("chat", "--repl", input="\n".join(lines) + "\n", timeout=timeout)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"tarsd did not stop on signal {sig}:\n{self.log.read_text()}") from None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.run_dir, ignore_errors=True)


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """A TCP server on 127.0.0.1 that accepts connections and never answers (a model hub that
    hangs). Yields its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


@contextlib.contextmanager
def notify_listener() -> Iterator[tuple[str, Callable[[str], list[str]]]]:
    """A NOTIFY_SOCKET for sd_notify messages: yields (path, wait_for_message)."""
    path = f"/tmp/tars-notify-{os.getpid()}-{time.monotonic_ns()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    listener.settimeout(DEADLINE_SECONDS)
    messages: list[str] = []

    def wait_message(text: str) -> list[str]:
        while not any(text in m for m in messages):
            messages.append(listener.recv(4096).decode())
        return messages

    try:
        yield path, wait_message
    finally:
        listener.close()
        os.unlink(path)
