"""An OpenAI-compatible endpoint on 127.0.0.1 that a test scripts: the stand-in every test of
an OpenAI-speaking client here uses (the `openai` policy, the EF judge, the test writer, the
endpoint checks).

The unmodified `openai` client drives it over real HTTP: GET /v1/models lists models as vLLM
does (each with its `root`), POST /v1/chat/completions is answered by the test's `answer(body)`
with a status and a JSON document; every request body is kept. With a `key`, both need
`Authorization: Bearer <key>` (401 otherwise; 403 for the key `forbidden`). It proves what the
clients send and how they read replies, never that a real server answers so
(training/tests/test_train_vllm.py asks a real vLLM server).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


def chat_completion(
    text: str,
    *,
    model: str = "m",
    usage: tuple[int, int] | None = None,
    logprobs: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    """A chat.completion document with one choice saying `text`; `usage`: (prompt tokens,
    completion tokens); `logprobs`: the choice's `logprobs.content` entries."""
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": finish_reason,
        "message": {"role": "assistant", "content": text},
    }
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    doc: dict[str, Any] = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [choice],
    }
    if usage is not None:
        doc["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        }
    return doc


def error(status: int, message: str, kind: str = "server_error") -> tuple[int, dict[str, Any]]:
    """An OpenAI-style error reply."""
    return status, {"error": {"message": message, "type": kind}}


class FakeEndpoint:
    """`with FakeEndpoint(answer) as ep:` a server at `ep.base_url` (http://127.0.0.1:PORT/v1);
    `ep.requests` the chat request bodies in order, `ep.raw` their bytes."""

    def __init__(
        self,
        answer: Answer | None = None,
        models: dict[str, str | None] | None = None,
        key: str | None = None,
    ) -> None:
        self.answer, self.key = answer, key
        self.models = [
            {
                "id": m,
                "object": "model",
                "created": 0,
                "owned_by": "vllm",
                "root": r,
                "parent": None,
            }
            for m, r in (models or {}).items()
        ]
        self.requests: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, code: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _refused(self) -> bool:
                if endpoint.key is None:
                    return False
                auth = self.headers.get("Authorization", "")
                if auth == "Bearer forbidden":
                    self._send(*error(403, "not for this key", "forbidden"))
                elif auth != f"Bearer {endpoint.key}":
                    self._send(*error(401, "Unauthorized", "auth"))
                else:
                    return False
                return True

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path != "/v1/models":
                    self._send(404, {"detail": "Not Found"})
                elif not self._refused():
                    self._send(200, {"object": "list", "data": endpoint.models})

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/v1/chat/completions" or endpoint.answer is None:
                    self._send(404, {"detail": "Not Found"})
                    return
                if self._refused():
                    return
                body = json.loads(raw)
                with endpoint._lock:
                    endpoint.raw.append(raw)
                    endpoint.requests.append(body)
                self._send(*endpoint.answer(body))

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Answer", "FakeEndpoint", "chat_completion", "error"]
