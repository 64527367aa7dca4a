"""The HTTP API against a real tarsd: httpx over TCP, the fake Ollama and Anthropic servers behind it."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import time

import pytest

from harness.vault_files import write
from harness.web import sse


def test_every_request_but_the_page_needs_the_token(http_daemon, vault):
    write(vault, "garden.md", "# Garden\n\ntomatoes need sun\n")
    web = http_daemon()
    assert stat.S_IMODE(web.token_file.stat().st_mode) == 0o600
    assert len(web.token) >= 40
    with web.client(token="") as anonymous:
        refused = anonymous.get("/search", params={"q": "tomatoes"})
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert refused.json() == {
            "type": "error",
            "code": "unauthorized",
            "message": "a valid bearer token is needed",
            "hint": "send Authorization: Bearer TOKEN; `tarsctl http token` prints it",
        }
        # The page, its script and style, and the API description hold no data: no token needed.
        page = anonymous.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert anonymous.get("/app.js").status_code == 200 and anonymous.get("/app.css").status_code == 200
        assert anonymous.get("/", params={"body": "<script>x</script>", "media": "text/plain"}).content == page.content
        spec = anonymous.get("/openapi.json").json()
        assert {"/chat", "/search", "/conversations", "/conversations/{conversation_id}", "/index", "/remember", "/status"} <= set(
            spec["paths"]
        )
        assert "ChatBody" in spec["components"]["schemas"] and spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
        assert "swagger" in anonymous.get("/docs").text.lower()
    with web.client(token="x" * 43) as wrong:
        assert wrong.get("/status").status_code == 401
    with web.client() as client:
        found = client.get("/search", params={"q": "tomatoes", "mode": "fts"})
        assert found.status_code == 200, found.text
        assert [hit["path"] for hit in found.json()["results"]] == ["garden.md"]
        assert found.headers["x-content-type-options"] == "nosniff" and found.headers["cache-control"] == "no-store"
    assert "wrong token" in web.daemon.log.read_text() and web.token not in web.daemon.log.read_text()


def test_wrong_host_and_origin_are_refused(http_daemon):
    web = http_daemon(TARS_HTTP_HOSTNAMES="tars.lan, 192.168.1.20")
    port = web.url.rsplit(":", 1)[1].strip("/")
    with web.client() as client:
        rebound = client.get("/status", headers={"Host": f"evil.example:{port}"})
        assert rebound.status_code == 403 and "does not answer to the host" in rebound.json()["message"]
        assert client.get("/", headers={"Host": f"evil.example:{port}"}).status_code == 403  # the page too
        assert client.get("/status", headers={"Host": "127.0.0.1:1"}).status_code == 403  # loopback, another port
        for origin in ("http://evil.example", f"http://evil.example:{port}", "null", "file://"):
            refused = client.get("/status", headers={"Origin": origin})
            assert refused.status_code == 403 and "origin" in refused.json()["message"], origin
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "tars.lan", "tars.lan:443", f"192.168.1.20:{port}"):
            assert client.get("/status", headers={"Host": host}).status_code == 200, host
        same_site = client.post("/remember", json={"fact": "I grow tomatoes"}, headers={"Origin": web.url.rstrip("/")})
        assert same_site.status_code == 200, same_site.text
        assert client.get("/status", headers={"Origin": "https://tars.lan"}).status_code == 200


def test_failed_authentication_is_rate_limited_per_address(http_daemon):
    web = http_daemon(TARS_HTTP_AUTH_FAILURES_BURST="3", TARS_HTTP_AUTH_FAILURES_PER_SECOND="0.5")
    with web.client(token="guess") as guesser, web.client() as owner:
        assert [guesser.get("/status").status_code for _ in range(3)] == [401, 401, 401]
        limited = guesser.get("/status")
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) in (1, 2)
        # Even the right token waits: otherwise guessing would go on, told apart by 401 and 200.
        assert owner.get("/status").status_code == 429
        assert owner.get("/").status_code == 200  # the page is not behind the token
        time.sleep(int(limited.headers["retry-after"]) + 0.1)
        status = owner.get("/status")
        assert status.status_code == 200
        http = status.json()["http"]
        assert http["auth_failures"] == 3 and http["rate_limited"] == 2 and http["enabled"] and http["url"] == web.url


def test_search_status_remember_and_index(http_daemon, vault):
    write(vault, "Sourdough.md", "# Sourdough\n\n## Bake\n\nBake covered at 250 °C for twenty minutes.\n")
    web = http_daemon()
    with web.client() as client:
        hits = client.get("/search", params={"q": "sourdough bake", "mode": "fts", "limit": 5}).json()
        assert hits["type"] == "search_results" and hits["coverage"]["notes_indexed"] >= 1
        hit = hits["results"][0]
        assert (hit["path"], hit["title"], hit["heading_path"], hit["band"]) == ("Sourdough.md", "Sourdough", "Sourdough", "relevant")
        assert "**Bake**" in hit["snippet"]
        bad = client.get("/search", params={"q": "x", "limit": 0})
        assert bad.status_code == 400 and bad.json()["code"] == "bad_request" and "limit" in bad.json()["message"]
        assert client.get("/search", params={"q": "x", "since": "someday"}).status_code == 400
        assert client.get("/search", params={"q": " "}).json()["message"] == "the query is empty"

        status = client.get("/status").json()
        assert status["type"] == "status_reply" and status["vault"] == str(vault) and status["counts"]["files"] == 1

        remembered = client.post("/remember", json={"fact": "my dog is called Perry"}).json()
        assert (remembered["type"], remembered["status"], remembered["path"]) == ("remembered", "added", "Memory.md")
        again = client.post("/remember", json={"fact": "My dog is called Perry"}).json()
        assert again["status"] == "duplicate"
        assert "my dog is called Perry" in (vault / "Memory.md").read_text()
        assert client.post("/remember", json={"fact": ""}).status_code == 400
        too_long = client.post("/remember", json={"fact": "x" * 10_001})
        assert too_long.status_code == 400 and "10000" in too_long.json()["message"]  # the protocol's own bound
        assert client.post("/remember", content=b"{not json", headers={"Content-Type": "application/json"}).status_code == 400

        write(vault, "new.md", "# New\n\nquinces ripen late\n")
        done = client.post("/index", json={"paths": ["new.md"]}).json()
        assert done["type"] == "index_done" and done["indexed"] == 1
        with client.stream("POST", "/index", json={"full": True, "stream": True}) as streamed:
            assert streamed.headers["content-type"].startswith("text/event-stream")
            events = list(sse(streamed))
        assert events[-1][0] == "index_done" and events[-1][1]["scanned"] == 3
        assert {name for name, _ in events[:-1]} <= {"progress"}
        assert client.get("/search", params={"q": "quinces", "mode": "fts"}).json()["results"][0]["path"] == "new.md"
        outside = client.post("/index", json={"paths": ["../elsewhere.md"]})
        assert outside.status_code == 400 and "not inside the vault" in outside.json()["message"]


def test_chat_streams_server_sent_events_with_tool_activity(http_daemon, vault, fake_ollama):
    write(vault, "bike.md", "# Bike\n\nthe chain was replaced in May\n")
    fake_ollama.script = [
        {"tool_calls": [{"name": "memory_search", "arguments": {"query": "bike chain"}}]},
        {"text": "Your chain was replaced in May.", "delay": 0.05},
    ]
    web = http_daemon()
    with web.client() as client:
        asked = {"conversation_id": "phone", "message": "when did I replace my chain?", "stream": True}
        with client.stream("POST", "/chat", json=asked) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            events = list(sse(r))
    names = [name for name, _ in events]
    assert names[:2] == ["tool_activity", "tool_activity"] and names[-1] == "chat_done"
    call, result = events[0][1], events[1][1]
    assert (call["phase"], call["name"], call["arguments"]) == ("call", "memory_search", {"query": "bike chain"})
    # The result as the model got it (cut for the event): the search's block, saying what it spent.
    assert result["phase"] == "result" and '<search-results query="bike chain" spent="' in result["result"]
    deltas = [data["text"] for name, data in events if name == "chat_delta"]
    assert len(deltas) == 6 and "".join(deltas) == "Your chain was replaced in May."
    done = events[-1][1]
    assert (done["conversation"], done["text"]) == ("phone", "Your chain was replaced in May.")
    assert (done["tool_rounds"], done["cancelled"]) == (1, False)

    # The same turn as one JSON reply (no stream), the Accept header asking for a stream.
    fake_ollama.script = [{"text": "Still May."}]
    with web.client() as client:
        whole = client.post("/chat", json={"conversation_id": "phone", "message": "and again?"}).json()
        assert (whole["type"], whole["text"], whole["tool_activity"]) == ("chat_done", "Still May.", [])
        fake_ollama.script = [{"text": "Streamed."}]
        asked = {"conversation_id": "phone", "message": "once more"}
        with client.stream("POST", "/chat", json=asked, headers={"Accept": "text/event-stream"}) as r:
            assert [name for name, _ in sse(r)] == ["chat_delta", "chat_done"]
        assert client.post("/chat", json={"message": "  "}).status_code == 400


def test_chat_through_anthropic(http_daemon, fake_anthropic):
    fake_anthropic.script = [{"text": "Hello from Claude."}]
    web = http_daemon(TARS_CHAT_ANTHROPIC_BASE_URL=fake_anthropic.url, ANTHROPIC_API_KEY="sk-test")
    with web.client() as client, client.stream("POST", "/chat", json={"message": "hi", "provider": "anthropic", "stream": True}) as r:
        events = list(sse(r))
    assert "".join(d["text"] for n, d in events if n == "chat_delta") == "Hello from Claude."
    assert events[-1] == ("chat_done", {**events[-1][1], "text": "Hello from Claude.", "conversation": "web"})
    assert "hi" in str(fake_anthropic.bodies("/v1/messages")[0]["messages"][0]["content"])


def test_provider_errors_become_json_errors_and_error_events(http_daemon):
    web = http_daemon(TARS_CHAT_OLLAMA_HOST="http://127.0.0.1:9", TARS_CHAT_MAX_RETRIES="0")
    with web.client() as client:
        failed = client.post("/chat", json={"message": "hello"})
        assert failed.status_code == 502
        assert failed.json()["code"] == "unreachable" and "ollama serve" in failed.json()["hint"]
        with client.stream("POST", "/chat", json={"message": "hello", "stream": True}) as r:
            assert r.status_code == 200
            assert [name for name, _ in sse(r)] == ["error"]


def test_conversations_survive_a_restart_and_delete_writes_the_session_log(http_daemon, vault, fake_ollama):
    fake_ollama.script = [{"text": "Noted."}]
    web = http_daemon()
    with web.client() as client:
        assert client.post("/chat", json={"conversation_id": "phone", "message": "my bike needs a new chain"}).json()["text"] == "Noted."
        listed = client.get("/conversations").json()
    assert listed["type"] == "conversation_list" and listed["total"] == 1
    phone = listed["conversations"][0]
    assert (phone["id"], phone["messages"], phone["unlogged"], phone["title"]) == ("phone", 2, 2, "my bike needs a new chain")
    assert phone["updated_at"] >= phone["created_at"] > 0

    assert web.daemon.stop() == 0
    web.daemon.start()
    web.refresh()
    fake_ollama.script = [{"text": "You said it needs a chain."}, {"text": "Bike repair\n- Sam's bike needs a new chain"}]
    with web.client() as client:
        again = client.post("/chat", json={"conversation_id": "phone", "message": "what did I say about my bike?"}).json()
        assert again["text"] == "You said it needs a chain."
        assert "my bike needs a new chain" in str(fake_ollama.bodies("/api/chat")[-1]["messages"])
        assert client.get("/conversations").json()["conversations"][0]["messages"] == 4

        ended = client.delete("/conversations/phone").json()
        assert ended["type"] == "conversation_ended" and ended["session_log"].startswith("sessions/")
        log = (vault / ended["session_log"]).read_text()
        assert "conversation: phone" in log and "Sam's bike needs a new chain" in log
        assert client.get("/conversations").json() == {"type": "conversation_list", "conversations": [], "total": 0}
        assert client.delete("/conversations/never-used").json()["session_log"] == ""


def test_a_conversation_reads_back_over_http(http_daemon, fake_ollama):
    fake_ollama.script = [
        {"tool_calls": [{"name": "memory_search", "arguments": {"query": "bike chain"}}]},
        {"text": "Noted: a new chain."},
        {"text": "A 9-speed chain."},
    ]
    web = http_daemon()
    with web.client() as client:
        client.post("/chat", json={"conversation_id": "phone", "message": "my bike needs a new <b>chain</b>"})
        client.post("/chat", json={"conversation_id": "phone", "message": "which one?"})
        read = client.get("/conversations/phone/messages")
        assert read.status_code == 200, read.text
        body = read.json()
        assert (body["type"], body["conversation"], body["found"], body["omitted"], body["compacted"], body["summary"]) == (
            "conversation_messages",
            "phone",
            True,
            0,
            0,
            "",
        )
        assert [(m["role"], m["text"], m["tools"], m["cut"]) for m in body["messages"]] == [
            ("user", "my bike needs a new <b>chain</b>", [], 0),
            ("assistant", "Noted: a new chain.", ["memory_search(query: bike chain)"], 0),
            ("user", "which one?", [], 0),
            ("assistant", "A 9-speed chain.", [], 0),
        ]
        assert 0 < body["messages"][0]["at"] <= body["messages"][3]["at"]
        last = client.get("/conversations/phone/messages", params={"limit": 1}).json()
        assert [m["text"] for m in last["messages"]] == ["A 9-speed chain."] and last["omitted"] == 3
        unknown = client.get("/conversations/never-used/messages").json()
        assert (unknown["conversation"], unknown["found"], unknown["messages"]) == ("never-used", False, [])
        refused = client.get("/conversations/phone/messages", params={"limit": 0})
        assert refused.status_code == 400 and refused.json()["code"] == "bad_request" and "limit" in refused.json()["message"]
        assert "/conversations/{conversation_id}/messages" in client.get("/openapi.json").json()["paths"]
    with web.client(token="") as anonymous:
        assert anonymous.get("/conversations/phone/messages").status_code == 401


def test_closing_a_stream_cancels_the_answer(http_daemon, fake_ollama):
    fake_ollama.script = [{"text": "one two three four five six seven eight nine ten", "delay": 0.3}, {"text": "ok"}]
    web = http_daemon()
    with web.client() as client:
        with client.stream("POST", "/chat", json={"conversation_id": "c", "message": "count slowly", "stream": True}) as r:
            assert next(sse(r))[0] == "chat_delta"
        # The client went away: the answer stops there, and the conversation keeps what was said.
        started = time.monotonic()
        assert client.post("/chat", json={"conversation_id": "c", "message": "what did you say?"}).json()["text"] == "ok"
    assert time.monotonic() - started < 2.5  # not the 3 s the whole answer would take
    said = [m["content"] for m in fake_ollama.bodies("/api/chat")[-1]["messages"] if m["role"] == "assistant"]
    assert len(said) == 1 and said[0].endswith("[cancelled]") and "ten" not in said[0]
    assert "Traceback" not in web.daemon.log.read_text()


def test_sigterm_with_an_open_stream_stops_at_once(http_daemon, fake_ollama):
    fake_ollama.script = [{"text": " ".join(["word"] * 200), "delay": 0.2}]
    web = http_daemon()
    with web.client() as client, client.stream("POST", "/chat", json={"message": "talk for a long time", "stream": True}) as r:
        events = sse(r)
        assert next(events)[0] == "chat_delta"
        started = time.monotonic()
        web.daemon.process.send_signal(signal.SIGTERM)
        rest = list(events)
        assert web.daemon.process.wait(timeout=10) == 0
    assert time.monotonic() - started < 5
    assert rest[-1][0] == "chat_done" and rest[-1][1]["cancelled"] is True
    assert "Traceback" not in web.daemon.log.read_text()


def test_listening_beyond_loopback_needs_lan_and_warns_about_tls(http_daemon, start_daemon):
    refused = start_daemon(TARS_HTTP_ENABLED="1", TARS_HTTP_HOST="0.0.0.0", TARS_HTTP_PORT="0")
    status = refused.status()
    assert not status.http.url and "lan = true" in status.http.error
    assert any("http:" in warning for warning in status.warnings) and refused.ping()
    assert refused.stop() == 0

    web = http_daemon(TARS_HTTP_HOST="0.0.0.0", TARS_HTTP_LAN="1")
    assert web.url.startswith("http://127.0.0.1:") and web.daemon.status().http.lan
    assert "unencrypted" in web.daemon.log.read_text() and "Tailscale" in web.daemon.log.read_text()
    with web.client() as client:
        assert client.get("/status").status_code == 200


def test_a_taken_port_or_an_open_token_file_leaves_the_socket_serving(start_daemon, tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        daemon = start_daemon(TARS_HTTP_ENABLED="1", TARS_HTTP_PORT=str(taken.getsockname()[1]))
        error = daemon.status().http.error
        assert "cannot listen on 127.0.0.1" in error and "[http] port" in error
        assert daemon.stop() == 0
    finally:
        taken.close()

    token = tmp_path / "state" / "http_token"
    token.write_text("t" * 43)
    token.chmod(0o644)
    daemon.start()
    assert "chmod 600" in daemon.status().http.error
    assert daemon.tarsctl("status").stdout.count("http       not listening") == 1


def test_tarsctl_http_token_url_and_rotate(http_daemon):
    web = http_daemon()
    printed = web.daemon.tarsctl("http", "token")
    assert printed.returncode == 0 and printed.stdout.strip() == web.token
    url = web.daemon.tarsctl("http", "url")
    assert url.stdout.strip() == f"{web.url}#token={web.token}"
    assert "http       " + web.url in web.daemon.tarsctl("status").stdout

    rotated = web.daemon.tarsctl("http", "token", "--rotate")
    new = rotated.stdout.strip()
    assert rotated.returncode == 0 and new != web.token and web.token_file.read_text().strip() == new
    assert stat.S_IMODE(os.stat(web.token_file).st_mode) == 0o600
    with web.client() as old:
        assert old.get("/status").status_code == 401  # taken at once, no restart
    with web.client(token=new) as client:
        assert client.get("/status").status_code == 200


def test_doctor_reports_the_listener(http_daemon):
    web = http_daemon()
    report = json.loads(web.daemon.tarsctl("doctor", "--json").stdout)
    lines = [c for c in report["checks"] if c["name"] == "http"]
    assert [c["status"] for c in lines] == ["ok"] and web.url in lines[0]["summary"]
    web.token_file.chmod(0o644)
    report = json.loads(web.daemon.tarsctl("doctor", "--json").stdout)
    problem = next(c for c in report["checks"] if c["name"] == "http")
    assert problem["status"] == "problem" and "chmod 600" in problem["summary"]


def test_tarsctl_http_token_before_the_listener_is_on(start_daemon, tmp_path):
    daemon = start_daemon()
    made = daemon.tarsctl("http", "token")
    assert made.returncode == 0 and len(made.stdout.strip()) >= 40
    assert "the HTTP listener is off" in made.stderr and "[http] enabled = true" in made.stderr
    assert stat.S_IMODE((tmp_path / "state" / "http_token").stat().st_mode) == 0o600
    assert daemon.tarsctl("http", "url").returncode == 1


@pytest.mark.parametrize("enabled", [False, True])
def test_the_web_framework_is_imported_only_when_the_listener_is_on(start_daemon, vault, enabled):
    """The default daemon's memory is unchanged: it never imports FastAPI, Starlette, pydantic or uvicorn,
    nor the MCP SDK (only the listener's /mcp, or a configured MCP server whose tools the chat uses, loads it),
    nor a messenger channel's code (only [whatsapp] enabled loads it)."""
    write(vault, "a.md", "tomatoes")
    env = {"PYTHONPROFILEIMPORTTIME": "1"}
    if enabled:
        env.update(TARS_HTTP_ENABLED="1", TARS_HTTP_PORT="0")
    daemon = start_daemon(**env)
    assert daemon.search("tomatoes") == ["a.md"]
    daemon.status()
    assert daemon.stop() == 0
    imported = {line.rsplit("|", 1)[1].strip() for line in daemon.log.read_text().splitlines() if line.startswith("import time:")}
    assert "tarsd.serve.socket_server" in imported and "apsw" in imported  # the import log does list the daemon's imports
    web = {name for name in imported if name.split(".")[0] in ("fastapi", "starlette", "pydantic", "pydantic_core", "uvicorn")}
    assert bool(web) == enabled, sorted(web)[:10]
    assert ("mcp" in imported) == enabled and "tarsd.tools.servers" in imported and "tarsd.tools.connection" not in imported
    assert not [name for name in imported if name.startswith("tarsd.channels")]  # no messenger channel is enabled
