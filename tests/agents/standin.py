"""A model stand-in for the real agent CLIs: no model can be reached from the tests.

One loopback HTTP server speaks enough of two wire protocols for a turn to complete:

- **Anthropic Messages**, as Claude Code calls it with ``ANTHROPIC_BASE_URL``:
  ``POST /v1/messages`` (``?beta=true``), streamed (server-sent events ``message_start``,
  ``content_block_start``, ``content_block_delta``, ``content_block_stop``,
  ``message_delta``, ``message_stop``) or not; ``POST /v1/messages/count_tokens``;
  ``GET /v1/models``.
- **OpenAI Responses**, as Codex calls it through a custom model provider
  (``base_url = "<url>/v1"``, ``wire_api = "responses"``): ``POST /v1/responses``, streamed
  (``response.created``, ``response.in_progress``, ``response.output_item.added``,
  ``response.content_part.added``, ``response.output_text.delta``/``done``,
  ``response.content_part.done``, ``response.output_item.done``, ``response.completed``);
  ``GET /v1/models``.

Every turn is answered with the same short text, and every request is recorded (method,
path, headers, body, arrival time); ``wait_for`` blocks on a condition variable until a
request carrying a given text arrives.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

REPLY = "ok"
# Model endpoints: a request to one of them is a model turn.
MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a decoded JSON value (keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@dataclass(frozen=True)
class Request:
    """One request the stand-in received."""

    at: float  # time.monotonic() when its body had been read
    method: str
    path: str  # without the query string
    query: str
    headers: dict[str, str]
    body: Any  # the decoded JSON body, or None
    raw: bytes = field(repr=False)

    @property
    def is_turn(self) -> bool:
        """A model turn: a Messages or Responses call (not counting tokens)."""
        return self.method == "POST" and self.path in (MESSAGES, RESPONSES)

    def contains(self, text: str) -> bool:
        """Whether ``text`` appears in the body: in one of its JSON strings (escapes
        undone) or, for a body that is not JSON, in its raw text."""
        if any(text in value for value in _strings(self.body)):
            return True
        return text in self.raw.decode("utf-8", errors="replace")

    def latest_user_text(self) -> str:
        """The text of the last user input of a turn (both wire formats), for messages."""
        body = self.body if isinstance(self.body, dict) else {}
        items = body.get("messages") or body.get("input") or []
        users = [item for item in items if isinstance(item, dict) and item.get("role") == "user"]
        return "\n".join(_strings(users[-1].get("content"))) if users else ""


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    standin: StandIn


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the record is the log

    def _record(self) -> Request:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        url = urlsplit(self.path)
        request = Request(
            at=time.monotonic(),
            method=self.command,
            path=url.path.rstrip("/") or "/",
            query=url.query,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
            raw=raw,
        )
        self.server.standin._add(request)
        return request

    def _send(self, status: int, content_type: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _json(self, data: Any, status: int = 200) -> None:
        self._send(status, "application/json", json.dumps(data).encode())

    def do_GET(self) -> None:
        request = self._record()
        if request.path.endswith("/models"):
            self._json(self.server.standin.model_list())
        else:
            self._json({"type": "error", "error": {"type": "not_found_error"}}, status=404)

    def do_HEAD(self) -> None:
        self._record()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        request = self._record()
        standin = self.server.standin
        body = request.body if isinstance(request.body, dict) else {}
        if request.path == f"{MESSAGES}/count_tokens":
            self._json({"input_tokens": max(1, len(request.raw) // 4)})
        elif request.path == MESSAGES:
            if body.get("stream"):
                self._send(200, "text/event-stream", standin.messages_stream(body))
            else:
                self._json(standin.message(body))
        elif request.path == RESPONSES:
            if body.get("stream", True):
                self._send(200, "text/event-stream", standin.responses_stream(body))
            else:
                self._json(standin.response(body))
        else:
            self._json({"type": "error", "error": {"type": "not_found_error"}}, status=404)


class StandIn:
    """The stand-in model server on 127.0.0.1 (a free port), served by a thread."""

    def __init__(self, reply: str = REPLY) -> None:
        self.reply = reply
        self._requests: list[Request] = []
        self._changed = threading.Condition()
        self._ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.standin = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="model-stand-in", daemon=True
        )

    # -- life -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    @property
    def url(self) -> str:
        """The base URL, without ``/v1`` (``ANTHROPIC_BASE_URL``)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> StandIn:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- the record ---------------------------------------------------------------------

    def _add(self, request: Request) -> None:
        with self._changed:
            self._requests.append(request)
            self._changed.notify_all()

    @property
    def requests(self) -> list[Request]:
        with self._changed:
            return list(self._requests)

    def turns(self) -> list[Request]:
        return [request for request in self.requests if request.is_turn]

    def mark(self) -> int:
        """A position in the record: ``wait_for(..., after=mark)`` looks only later."""
        with self._changed:
            return len(self._requests)

    def wait(
        self, match: Callable[[Request], bool], *, after: int = 0, timeout: float
    ) -> Request | None:
        """The first request at or after position ``after`` that ``match`` accepts, waiting
        up to ``timeout`` seconds for it to arrive; None if none did."""
        deadline = time.monotonic() + timeout
        seen = after
        with self._changed:
            while True:
                for request in self._requests[seen:]:
                    if match(request):
                        return request
                seen = max(seen, len(self._requests))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(remaining)

    def wait_for(self, text: str, *, after: int = 0, timeout: float) -> Request | None:
        """The first model turn at or after ``after`` whose body contains ``text``."""
        return self.wait(
            lambda request: request.is_turn and request.contains(text),
            after=after,
            timeout=timeout,
        )

    def wait_for_turn(self, *, after: int = 0, timeout: float) -> Request | None:
        return self.wait(lambda request: request.is_turn, after=after, timeout=timeout)

    # -- the answers --------------------------------------------------------------------

    def model_list(self) -> dict[str, Any]:
        models = ["claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-5-5", "gpt-5-codex"]
        data = [
            {
                "type": "model",
                "id": name,
                "object": "model",
                "display_name": name,
                "created_at": "2025-01-01T00:00:00Z",
                "created": 1735689600,
                "owned_by": "stand-in",
            }
            for name in models
        ]
        return {"data": data, "object": "list", "has_more": False, "models": []}

    def _usage(self) -> dict[str, int]:
        return {
            "input_tokens": 10,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }

    def message(self, body: dict[str, Any]) -> dict[str, Any]:
        """A whole Messages answer: one text block, the turn ended."""
        return {
            "id": f"msg_standin_{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-sonnet-4-5"),
            "content": [{"type": "text", "text": self.reply}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": self._usage(),
        }

    def messages_stream(self, body: dict[str, Any]) -> bytes:
        message = self.message(body)
        start = {**message, "content": [], "stop_reason": None}
        return _sse(
            [
                ("message_start", {"type": "message_start", "message": start}),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                ("ping", {"type": "ping"}),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": self.reply},
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": 1},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )

    def response(self, body: dict[str, Any]) -> dict[str, Any]:
        """A whole Responses answer: one assistant message, completed."""
        number = next(self._ids)
        item = self._output_message(number, done=True)
        return {
            "id": f"resp_standin_{number}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": body.get("model", "gpt-5-codex"),
            "output": [item],
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 1,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 11,
            },
        }

    def _output_message(self, number: int, *, done: bool) -> dict[str, Any]:
        content = [{"type": "output_text", "text": self.reply, "annotations": []}]
        return {
            "id": f"msg_standin_{number}",
            "type": "message",
            "status": "completed" if done else "in_progress",
            "role": "assistant",
            "content": content if done else [],
        }

    def responses_stream(self, body: dict[str, Any]) -> bytes:
        whole = self.response(body)
        number = int(whole["id"].rsplit("_", 1)[1])
        item_id = f"msg_standin_{number}"
        started = {**whole, "status": "in_progress", "output": [], "usage": None}
        part = {"type": "output_text", "text": "", "annotations": []}
        done_part = {**part, "text": self.reply}
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": started}),
            ("response.in_progress", {"response": started}),
            (
                "response.output_item.added",
                {"output_index": 0, "item": self._output_message(number, done=False)},
            ),
            (
                "response.content_part.added",
                {"item_id": item_id, "output_index": 0, "content_index": 0, "part": part},
            ),
            (
                "response.output_text.delta",
                {"item_id": item_id, "output_index": 0, "content_index": 0, "delta": self.reply},
            ),
            (
                "response.output_text.done",
                {"item_id": item_id, "output_index": 0, "content_index": 0, "text": self.reply},
            ),
            (
                "response.content_part.done",
                {"item_id": item_id, "output_index": 0, "content_index": 0, "part": done_part},
            ),
            (
                "response.output_item.done",
                {"output_index": 0, "item": self._output_message(number, done=True)},
            ),
            ("response.completed", {"response": whole}),
        ]
        return _sse(
            [
                (name, {"type": name, "sequence_number": sequence, **data})
                for sequence, (name, data) in enumerate(events)
            ]
        )
