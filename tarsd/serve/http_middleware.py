"""The ASGI guard in front of everything the HTTP listener serves, mounts included: the Host and
Origin checks and the bearer token (the rules are in http_guard and http_token), the failed
attempts rate-limited per client, and the security headers on every response.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from fastapi.responses import Response

from tarsctl.authority import Principal
from tarsctl.protocol import (
    Error,
)
from tarsd.serve.http_app import DOCS, PAGES
from tarsd.serve.http_guard import (
    FailureLimiter,
    HostPolicy,
    client_key,
    retry_after_header,
)
from tarsd.serve.http_json import error_response, json_response
from tarsd.serve.http_token import TokenCheck

log = logging.getLogger(__name__)

PUBLIC = frozenset(PAGES) | frozenset(DOCS)
# Strict for everything but the docs page (FastAPI's Swagger UI loads its script from a CDN):
# the page's own script only, no inline script, no other site; vault text can never run as code.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]

TOKEN_HINT = "send Authorization: Bearer TOKEN; `tarsctl http token` prints it"

# Who the request being served came from, set by the guard from the token it presented and read
# by the door's dispatcher (tarsd/serve/http.py): a request with no accepted token is data, with
# no rights at all. A context variable carries it to the endpoint and into its response stream.
CALLER: ContextVar[Principal] = ContextVar("tars_http_caller", default=Principal.DATA)


@dataclass(slots=True)
class Counters:
    requests: int = 0
    auth_failures: int = 0
    rate_limited: int = 0


class Guard:
    """ASGI middleware in front of everything the listener serves, mounts included."""

    def __init__(
        self,
        app: Any,
        policy: HostPolicy,
        token: TokenCheck,
        limiter: FailureLimiter,
        counters: Counters,
        self_authenticated: tuple[str, ...] = (),
        mcp_token: TokenCheck | None = None,
    ):
        self.app, self.policy, self.token, self.limiter, self.counters = app, policy, token, limiter, counters
        # The MCP clients' token: accepted everywhere, as an MCP client (tarsctl/authority.py).
        self.mcp_token = mcp_token
        # Paths whose app checks its callers itself (a webhook's signature): no bearer token there.
        self.self_authenticated = self_authenticated
        self._logged_failures = 0

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        if scope["type"] != "http":  # no websockets here
            return await send({"type": "websocket.close", "code": 1008})
        self.counters.requests += 1
        path = scope.get("path", "")

        async def send_secured(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(SECURITY_HEADERS)
                if not path.startswith("/docs"):
                    headers.append((b"content-security-policy", CSP.encode()))
                message = {**message, "headers": headers}
            await send(message)

        refusal = self.refusal(scope, path)
        if refusal is not None:
            return await refusal(scope, receive, send_secured)
        caller = CALLER.set(scope.pop("tars.caller", Principal.DATA))
        try:
            await self.app(scope, receive, send_secured)
        finally:
            CALLER.reset(caller)

    def refusal(self, scope: dict, path: str) -> Response | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if not self.policy.host_ok(host):
            return error_response(
                Error(
                    code="forbidden",
                    message=f"this listener does not answer to the host {host!r}",
                    hint="use http://127.0.0.1:PORT/, or add the name to [http] hostnames",
                )
            )
        origin = headers.get("origin")
        if origin is not None and not self.policy.origin_ok(origin):
            return error_response(
                Error(
                    code="forbidden",
                    message=f"requests from the origin {origin!r} are refused",
                    hint="open the page from tarsd itself, or add the origin to [http] origins",
                )
            )
        if path in PUBLIC or any(path == own or path.startswith(own + "/") for own in self.self_authenticated):
            return None
        address = (scope.get("client") or ("unknown", 0))[0]
        scheme, _, presented = headers.get("authorization", "").partition(" ")
        presented = presented.strip() if scheme.lower() == "bearer" else ""
        if not presented:
            # Not counted as a failure: it guesses nothing, and any web page can make the browser
            # send such a request (an <img> from 127.0.0.1), which would lock the user out.
            return self.unauthorized(scope, path, address, "no token", "a valid bearer token is needed", TOKEN_HINT)
        client = client_key(address)
        wait = self.limiter.retry_after(client)
        if wait > 0:
            self.counters.rate_limited += 1
            return json_response(
                Error(code="rate_limited", message="too many failed attempts from your address", hint="wait, then send the right token"),
                429,
                {"Retry-After": retry_after_header(wait)},
            )
        verdict = self.token.check(presented)
        if verdict:
            scope["tars.caller"] = Principal.BROWSER
            return None
        if self.mcp_token is not None and self.mcp_token.matches(presented):
            scope["tars.caller"] = Principal.MCP_CLIENT
            return None
        if verdict is None:
            # No token is right while the file cannot be trusted: the user has to fix the file,
            # not find another token (the page keeps the one it has on this answer).
            self.log_refusal(scope, path, address, "the token file cannot be used")
            return error_response(Error(code="unavailable", message=self.token.error, hint="then send the request again"))
        self.limiter.failed(client)
        self.counters.auth_failures += 1
        return self.unauthorized(scope, path, address, "wrong token", "the bearer token is wrong", TOKEN_HINT)

    def unauthorized(self, scope: dict, path: str, address: str, why: str, message: str, hint: str) -> Response:
        self.log_refusal(scope, path, address, why)
        return json_response(Error(code="unauthorized", message=message, hint=hint), 401, {"WWW-Authenticate": "Bearer"})

    def log_refusal(self, scope: dict, path: str, address: str, why: str) -> None:
        if self._logged_failures < 20:  # enough to notice; never a flood in the journal
            self._logged_failures += 1
            log.warning("HTTP: refused %s %s from %s: %s", scope.get("method"), path, address, why)
