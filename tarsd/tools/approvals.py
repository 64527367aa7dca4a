"""Calls waiting for the user: a chat turn that wants to run an ``ask`` tool opens a request and
waits; only a door the user speaks through answers it (tarsctl chat on the socket, a POST over
HTTP, the web page's card). Neither the model nor a tool's result can reach this: nothing they
say is read as an answer, and the request's id is never shown to the model. A request nobody
answers within the time limit counts as no.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Answer:
    approved: bool
    always: bool  # also allow this tool from now on (written as an allow rule)
    by: str  # who answered, for the log: "you in tarsctl chat", "you over HTTP"


@dataclass(slots=True)
class Request:
    id: str
    server: str
    tool: str
    name: str  # as the model knows it
    arguments: dict
    conversation: str
    asked_at: float = field(default_factory=time.time)
    answer: Answer | None = None
    answered: threading.Event = field(default_factory=threading.Event)


class Approvals:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, Request] = {}

    def open(self, server: str, tool: str, name: str, arguments: dict, conversation: str) -> Request:
        request = Request(uuid.uuid4().hex[:16], server, tool, name, arguments, conversation)
        with self._lock:
            self._waiting[request.id] = request
        return request

    def wait(self, request: Request, timeout: float, cancel: threading.Event) -> Answer | None:
        """The user's answer; None when none came within ``timeout`` or the chat was cancelled. The
        request is closed either way: a late answer finds nothing to decide."""
        deadline = time.monotonic() + timeout
        while not request.answered.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            if cancel.is_set() or time.monotonic() >= deadline:
                break
        with self._lock:  # an answer and the deadline may cross: whichever took the lock first holds
            self._waiting.pop(request.id, None)
            return request.answer

    def decide(self, request_id: str, approve: bool, always: bool, by: str) -> Request | None:
        """Answer a waiting request; None when there is none under this id (answered, timed out, or
        asked before tarsd restarted)."""
        with self._lock:
            request = self._waiting.pop(request_id, None)
            if request is None:
                return None
            request.answer = Answer(approve, approve and always, by)
        request.answered.set()
        return request

    def waiting(self) -> list[Request]:
        with self._lock:
            return list(self._waiting.values())
