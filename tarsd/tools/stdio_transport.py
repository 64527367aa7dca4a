"""A stdio server's transport, as the SDK's ``stdio_client`` makes one (the read and write streams
its ``Client`` takes), with two differences that the SDK's cannot give:

- The server's stdout is read in chunks through tarsd/tools/cut_stream.py, line by line: a long
  string in a message is cut as it arrives, so a 50 MB result costs bounded memory and linear
  time (the SDK's reader joins each chunk to the line so far: quadratic, and the whole line held).
- The end of the connection is the end of the process, not only of its stdout: a server that
  crashes while a child it forked holds its stdout gives no end of file, and would otherwise be
  "ready" until a call ran out of time. Its exit closes the read stream (the session then ends
  every call waiting on it), and its leftover children are ended with it.

The start and stop are the SDK's: a new session (process group), the SDK's default environment
and the user's on top; at the end stdin closed, a grace period, then the group SIGTERMed and
SIGKILLed (mcp/os/posix/utilities.py). POSIX only, as tarsd is.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

import anyio
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from tarsd.tools.cut_stream import CHUNK, JsonCutter, cut_message

log = logging.getLogger(__name__)

EXIT_POLL_SECONDS = 0.1  # how often the process is looked at (its returncode): a crash is seen this soon
# After the process exits, what it wrote before is still read for this long; a pipe a child holds
# open gives no end of file, so the read is not waited for past it.
DRAIN_SECONDS = 0.5
STDIN_GRACE_SECONDS = 2.0  # for the server to exit on its own once its stdin is closed (as the SDK)
KILL_SECONDS = 2.0  # from SIGTERM to SIGKILL of its process group
WRITER_FLUSH_SECONDS = 0.5


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    env: dict[str, str] | None,
    cwd: str | None,
    errlog: TextIO,
    max_chars: int,
    nonce: str,
) -> AsyncIterator[tuple]:
    """The server's process started, and (read stream, write stream) for the SDK's Client.
    ``max_chars`` and ``nonce``: for the cut of long strings (tarsd/tools/cut_stream.py)."""
    process = await anyio.open_process(
        [command, *args],
        env=get_default_environment() | (env or {}),
        stderr=errlog,
        cwd=Path(cwd) if cwd else None,
        start_new_session=True,
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    stdout_ended = anyio.Event()

    async def deliver(data: bytes) -> None:
        if not data.strip():
            return
        try:
            message: SessionMessage | Exception = SessionMessage(types.jsonrpc_message_adapter.validate_json(data, by_name=False))
        except ValueError as exc:  # a line that is not a message (a server's own log on stdout)
            log.warning("Failed to parse JSONRPC message from server: %s", exc)
            message = exc
        await read_writer.send(message)

    async def read_stdout() -> None:
        assert process.stdout is not None
        cutter = JsonCutter(max_chars, nonce)
        try:
            while True:
                try:
                    chunk = await process.stdout.receive(CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    break
                start = 0
                while (newline := chunk.find(b"\n", start)) >= 0:
                    cutter.feed(chunk[start:newline])
                    if (data := cut_message(cutter)) is not None:
                        await deliver(data)
                    cutter = JsonCutter(max_chars, nonce)
                    start = newline + 1
                cutter.feed(chunk[start:])
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session is gone, or the process's exit closed the stream
        finally:
            stdout_ended.set()
            read_writer.close()

    async def watch_exit() -> None:
        while process.returncode is None:
            await anyio.sleep(EXIT_POLL_SECONDS)
        with anyio.move_on_after(DRAIN_SECONDS):
            await stdout_ended.wait()
        if not stdout_ended.is_set():
            log.warning(
                "MCP server process %d exited (code %s) while its stdout stays open (a child of it holds it)",
                process.pid,
                process.returncode,
            )
        read_writer.close()  # the session sees the end: every call waiting on the server ends at once

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            read_writer.close()  # a stdin that cannot be written: the connection is over
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdout)
        tasks.start_soon(write_stdin)
        tasks.start_soon(watch_exit)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):  # the process is stopped even when the caller is cancelled
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(WRITER_FLUSH_SECONDS):
                    await writer_done.wait()
                await _stop(process)
            tasks.cancel_scope.cancel()


async def _stop(process) -> None:
    """Close stdin, wait for the exit, then end the whole process group: the server if it is still
    there, and any child it left (one that holds its stdout, say) if it is gone."""
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    with anyio.move_on_after(STDIN_GRACE_SECONDS):
        while process.returncode is None:
            await anyio.sleep(0.01)
    with anyio.move_on_after(KILL_SECONDS + 2.0):
        await terminate_posix_process_tree(process, KILL_SECONDS)
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    transport = getattr(getattr(process, "_process", None), "_transport", None)  # as the SDK: not left open to warn at collection
    if transport is not None:
        with contextlib.suppress(PermissionError):
            transport.close()
    if process.returncode is None:
        log.warning("MCP server process %d is still alive after SIGKILL; left behind", process.pid)
