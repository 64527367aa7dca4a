"""JSON in and out of the HTTP door: a request body read (bounded like a socket frame) and
turned into the protocol message the socket would carry, and a reply rendered as JSON with
every field, or as a server-sent event; an Error's code becomes the HTTP status.
"""

from __future__ import annotations

from typing import Any

import msgspec
from fastapi import Request
from fastapi.responses import Response
from starlette.requests import ClientDisconnect

from tarsctl.protocol import Error, Message
from tarsctl.transport import MAX_REQUEST_BYTES

STATUS_OF_CODE = {
    "bad_request": 400,
    "not_found": 404,
    "forbidden": 403,
    "unavailable": 503,
    "busy": 503,
    "timeout": 504,
    "index_failed": 500,
    "vault_missing": 503,
    "io_error": 500,
    "internal": 500,
    # the chat provider's codes: the model behind tars failed, not this request
    "unreachable": 502,
    "no_api_key": 502,
    "auth": 502,
    "model_missing": 502,
    "rate_limited": 502,
    "stream_broken": 502,
    "provider_error": 502,
}


class HttpError(Exception):
    def __init__(self, status: int, code: str, message: str, hint: str = "", headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.error, self.headers = status, Error(code=code, message=message, hint=hint), headers or {}


# ---- JSON and SSE ----


def as_json(value: object) -> object:
    """Builtins with every field, defaults included (msgspec leaves defaults out on the socket);
    a message carries its type, as on the socket."""
    if isinstance(value, msgspec.Struct):
        fields = {name: as_json(getattr(value, name)) for name in value.__struct_fields__}
        tag = value.__struct_config__.tag
        if isinstance(tag, str):
            fields = {"type": tag, **fields}
            fields.pop("id", None)  # the socket's request id means nothing over HTTP
        return fields
    if isinstance(value, dict):
        return {key: as_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(item) for item in value]
    return value


def json_response(value: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(msgspec.json.encode(as_json(value)), status_code=status, media_type="application/json", headers=headers)


def error_response(error: Error, headers: dict[str, str] | None = None) -> Response:
    return json_response(error, STATUS_OF_CODE.get(error.code, 500), headers)


def sse_event(message: Message) -> bytes:
    tag = message.__struct_config__.tag
    return b"event: " + str(tag).encode() + b"\ndata: " + msgspec.json.encode(as_json(message)) + b"\n\n"


def wants_stream(request: Request, asked: bool) -> bool:
    return asked or "text/event-stream" in request.headers.get("accept", "")


async def read_body(request: Request, shape: type) -> Any:
    """The JSON body decoded into ``shape``, at most the socket's request size."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
        raise HttpError(413, "too_large", f"a body of {declared} bytes is over the {MAX_REQUEST_BYTES}-byte limit")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_REQUEST_BYTES:
                raise HttpError(413, "too_large", f"the body is over the {MAX_REQUEST_BYTES}-byte limit")
    except ClientDisconnect:
        # The client went away, or its body was too slow to arrive and the connection was closed:
        # nobody reads this answer, but it ends the request without a traceback.
        raise HttpError(408, "timeout", "the connection closed before the whole body arrived") from None
    try:
        return msgspec.json.decode(bytes(body) or b"{}", type=shape)
    except msgspec.ValidationError as exc:
        raise HttpError(400, "bad_request", f"invalid body: {exc}", "see /docs for the fields") from exc
    except msgspec.DecodeError as exc:
        raise HttpError(400, "bad_request", f"the body is not JSON: {exc}", "send a JSON object (Content-Type: application/json)") from exc


def protocol_message(message_type: type, /, **fields: object) -> Any:
    """The protocol message the socket would carry, checked against the same bounds (a length,
    a limit, a score) as a frame the socket decodes."""
    try:
        return msgspec.convert(fields, message_type)
    except msgspec.ValidationError as exc:
        raise HttpError(400, "bad_request", f"invalid request: {exc}", "see /docs for the fields and their bounds") from exc
