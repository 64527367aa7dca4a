"""The authority table (tarsctl/authority.py) covers every request every door can carry, and
docs/security.md shows the same table: a new request type, a new HTTP endpoint or a changed right
without an entry (or a page left behind) fails here."""

from __future__ import annotations

import asyncio
import re

from harness.paths import REPO
from tarsctl.authority import AUTHORITY, NEEDS, Principal, Right, needed, refusal
from tarsctl.protocol import Chat, DecideRule, DecideToolCall, Forget, Remember, Search
from tarsd.serve.handlers import HANDLERS
from tarsd.serve.http_app import DOCS, PAGES, ROUTES, build_app

MARK = {"yes": True, "no": False}


def test_every_request_type_a_door_dispatches_has_an_entry():
    assert set(HANDLERS) == set(NEEDS), "tarsctl/authority.py NEEDS and the dispatcher's HANDLERS name different request types"


def test_every_http_endpoint_runs_a_request_the_table_knows():
    loop = asyncio.new_event_loop()
    try:
        app = build_app(lambda request: iter(()), loop.create_future())
    finally:
        loop.close()
    served = set()
    for route in app.routes:
        methods = getattr(route, "methods", None) or set()
        if route.path in PAGES or route.path in DOCS or not methods:
            continue
        served |= {(method, route.path) for method in methods if method != "HEAD"}
    assert served == set(ROUTES), "an HTTP endpoint is missing from http_app.ROUTES (or ROUTES names one that is gone)"
    assert set(ROUTES.values()) <= set(NEEDS)


def test_docs_security_holds_the_same_table():
    page = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    section = page[page.index("## Who may do what") :]
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break  # the first table only
        rows.append(line)
    header = [cell.strip().strip("`") for cell in rows[0].strip("|").split("|")]
    assert header[1:] == [right.value for right in Right], "docs/security.md: the table's columns are not the rights in order"
    shown = {}
    for row in rows[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        principal = re.search(r"`(\w+)`", cells[0]).group(1)
        shown[Principal(principal)] = frozenset(right for right, cell in zip(Right, cells[1:], strict=True) if MARK[cell])
    assert shown == AUTHORITY, "docs/security.md's table says other rights than tarsctl/authority.py"


def test_the_rights_a_request_needs_follow_its_fields():
    assert needed(Remember(fact="x")) == {Right.REMEMBER_AS_USER}
    assert needed(Remember(fact="x", by_model=True)) == {Right.PROPOSE}
    assert needed(Forget(text="x")) == {Right.READ}
    assert needed(Forget(confirm_line="x", by_model=True)) == {Right.PROPOSE}
    assert needed(Chat(message="hi", allow_tools=["todo"])) == {Right.CONVERSE, Right.ALLOW_TOOL}
    assert needed(DecideToolCall(approval="a", approve=True, always=True)) == {Right.APPROVE_TOOL_CALL, Right.ALLOW_TOOL}
    # An MCP client, the model and data can never approve, allow, or write a line as the user's.
    for principal in (Principal.MCP_CLIENT, Principal.MODEL, Principal.DATA):
        for request in (Remember(fact="x"), DecideRule(rule_id=1, approve=True), DecideToolCall(approval="a", approve=True)):
            assert refusal(principal, request) is not None, (principal, request)
        assert refusal(principal, Chat(message="hi", allow_tools=["todo"])) is not None
    assert refusal(Principal.DATA, Search(query="x")) is not None
    assert refusal(Principal.MCP_CLIENT, Search(query="x")) is None
    what, hint = refusal(Principal.MCP_CLIENT, DecideRule(rule_id=1, approve=True))
    assert what == "an MCP client may not approve_rule (DecideRule needs it)" and "tarsctl rules" in hint
