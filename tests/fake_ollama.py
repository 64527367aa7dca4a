"""A fake Ollama server on 127.0.0.1 speaking the real HTTP wire format.

Tests point the official ``ollama`` client at it; nothing inside the client is patched.
Embeddings are a deterministic bag of hashed words, so similar texts get similar vectors.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def bag_of_words(text: str, dims: int) -> list[float]:
    vector = [0.0] * dims
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dims] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class FakeOllama:
    def __init__(self, models: dict[str, int] | None = None):
        self.models = dict(models or {"fake-embed": 64})  # model name -> dimensions
        self.requests: list[tuple[str, dict]] = []
        self.fail_with: int | None = None  # answer every request with this HTTP status
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append((self.path, body))
                if server.fail_with is not None:
                    return self._reply(server.fail_with, {"error": "the fake server was told to fail"})
                if self.path == "/api/embed":
                    return self._embed(body)
                self._reply(404, {"error": f"unknown endpoint {self.path}"})

            def _embed(self, body):
                model = body.get("model", "")
                dims = server.models.get(model.removesuffix(":latest"))
                if dims is None:
                    return self._reply(404, {"error": f'model "{model}" not found, try pulling it first'})
                inputs = body.get("input")
                inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
                self._reply(200, {"model": model, "embeddings": [bag_of_words(t, dims) for t in inputs]})

            def _reply(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeOllama:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def embed_calls(self) -> int:
        return sum(1 for path, _ in self.requests if path == "/api/embed")
