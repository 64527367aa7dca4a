"""The two bodies a socket connection may speak, and how its first frame picks one.

msgpack is the protocol's own (tarsctl's full client, editor plugins). JSON is for clients that
have no msgpack at hand: tarsctl's quick path, which answers `search` and `ping` without loading
msgspec, and scripts in any language. A connection whose hello is a JSON object (its body starts
with ``{``, which no msgpack map does) is answered in JSON throughout, every field present,
defaults included, so such a client needs no table of defaults. Both decode into the same
messages, checked against the same bounds.
"""

from __future__ import annotations

import msgspec

from tarsctl.protocol import ClientMessage, Message, every_field, server_decoder
from tarsctl.transport import HEADER
from tarsd.serve.handlers.common import RequestError


class Codec:
    def __init__(self, name: str, decoder, encode):
        self.name = name
        self._decoder = decoder
        self._encode = encode

    def decode(self, body: bytes) -> Message:
        """A request, or RequestError saying what is wrong with the frame."""
        try:
            return self._decoder.decode(body)
        except msgspec.ValidationError as exc:
            raise RequestError("bad_request", f"invalid request: {exc}", "check the message against docs/protocol.md") from exc
        except msgspec.DecodeError as exc:
            raise RequestError(
                "bad_frame",
                f"the frame body is not {self.name}: {exc}",
                "frames are a 4-byte big-endian length and a msgpack body (or JSON, when the hello was JSON)",
            ) from exc
        except UnicodeDecodeError as exc:
            raise RequestError("bad_frame", f"a string in the frame is not valid UTF-8: {exc.reason}", "encode strings as UTF-8") from exc
        except RecursionError as exc:
            raise RequestError("bad_frame", "the frame is nested too deeply", "requests are flat maps (docs/protocol.md)") from exc

    def frame(self, message: Message) -> bytes:
        body = self._encode(message)
        return HEADER.pack(len(body)) + body


_msgpack_encoder = msgspec.msgpack.Encoder()
_json_encoder = msgspec.json.Encoder()


def _json_body(message: Message) -> bytes:
    # Through msgpack and back first: a field holds what its type says (a float field set to
    # the int 0 reads 0.0), exactly what the msgpack client decodes, then every field of it.
    typed = server_decoder.decode(_msgpack_encoder.encode(message))
    return _json_encoder.encode(every_field(typed))


MSGPACK = Codec("msgpack", msgspec.msgpack.Decoder(ClientMessage), _msgpack_encoder.encode)
JSON = Codec("JSON", msgspec.json.Decoder(ClientMessage), _json_body)


def codec_of(first_body: bytes) -> Codec:
    """The codec of a connection, from its first frame's body."""
    return JSON if first_body[:1] == b"{" else MSGPACK
