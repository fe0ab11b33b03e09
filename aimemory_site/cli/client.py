"""A small JSON client for the ai-memory API, on the standard library only.

Every failure becomes a ``ClientError`` whose message is one line a person can act on:
the commands print it to stderr and exit 1, never a traceback.
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any

from aimemory_site.cli.errors import CliError

DEFAULT_SERVER_URL = "http://127.0.0.1:8000"
SERVER_URL_ENV = "AI_MEMORY_SERVER_URL"
AUTH_TOKEN_ENV = "AI_MEMORY_AUTH_TOKEN"
# A server on the same machine or network connects in milliseconds; one that has not in
# this long is not coming (a dropped SYN, a dead host), and saying so beats a long hang.
CONNECT_TIMEOUT_SECONDS = 5.0
# How long an answer may take once the request is sent. A read answers in well under a
# second on a busy server; a write may wait for a deciding admission webhook, which may
# take up to 30 s. A request that asks the server to wait (wait_seconds) gets that on top.
READ_TIMEOUT_SECONDS = 15.0
WRITE_TIMEOUT_SECONDS = 35.0
# Error bodies that are not the API's JSON (a proxy's HTML page) are cut to this.
MAX_RAW_DETAIL_CHARS = 200
ISSUE_TOKEN_COMMAND = "`ai-memory manage issue_token USER`"
SERVE_COMMAND = "`ai-memory serve`"
MCP_PATH = "/mcp"
PROJECT_NOT_FOUND_CODE = "project_not_found"


class ClientError(CliError):
    """A request that did not produce a usable answer. ``code`` is the machine code of the
    server's JSON error body, if it sent one, and ``status`` its HTTP status, if an answer
    came, so a command can say what the failure means for it."""

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


class RetryableError(ClientError):
    """No answer reached us, or a proxy said the server was away (502, 503, 504): the
    request may or may not have happened, so only an idempotent request may be repeated."""


class NoAnswerError(ClientError):
    """The server took the request and did not answer in time. Not retried: a server that
    held one request would hold its repeat as long."""


# A gateway's way of saying the server did not answer; the request may have happened.
RETRYABLE_STATUSES = frozenset({502, 503, 504})
# Statuses whose non-API body most likely means the URL does not lead to the API at all.
_WRONG_PLACE_STATUSES = frozenset({404, 405})


class _ConnectTimeout(TimeoutError):
    """The TCP (and TLS) connection was not established in time; distinct from a timeout
    while waiting for the answer, which urllib raises as a plain ``TimeoutError``."""


class _TimedHTTPConnection(http.client.HTTPConnection):
    """Connects within the connect timeout, then waits up to ``read_timeout`` for data."""

    def __init__(self, *args: Any, read_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_timeout = read_timeout

    def connect(self) -> None:
        try:
            super().connect()
        except TimeoutError as exc:
            raise _ConnectTimeout(str(exc)) from exc
        self.sock.settimeout(self.read_timeout)


class _TimedHTTPSConnection(_TimedHTTPConnection, http.client.HTTPSConnection):
    """The same over TLS: the handshake counts as connecting."""


class _TimedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, read_timeout: float) -> None:
        super().__init__()
        self.read_timeout = read_timeout

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_TimedHTTPConnection, read_timeout=self.read_timeout)
        return self.do_open(connection, req)


class _TimedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, read_timeout: float) -> None:
        super().__init__()
        self.read_timeout = read_timeout

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_TimedHTTPSConnection, read_timeout=self.read_timeout)
        return self.do_open(connection, req)


def server_url_from(environ: Mapping[str, str]) -> str:
    return (environ.get(SERVER_URL_ENV, "").strip() or DEFAULT_SERVER_URL).rstrip("/")


def auth_token_from(environ: Mapping[str, str]) -> str:
    return environ.get(AUTH_TOKEN_ENV, "").strip()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _parsed_json(raw: bytes) -> object:
    try:
        return json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        return None


def _not_the_api(parsed: object, raw: bytes, content_type: str) -> str | None:
    """What a body that is not the API's JSON is, in a few words (``an HTML page``), or
    None when it is a JSON object of the API's kind. ``parsed`` is the body as JSON."""
    if isinstance(parsed, dict):
        return "a JSON-RPC body" if "jsonrpc" in parsed else None
    if "html" in content_type.lower() or raw.lstrip()[:1] == b"<":
        return "an HTML page"
    return "no JSON object" if parsed is not None or raw.strip() else "an empty body"


def _error_detail(raw: bytes, reason: str) -> tuple[str, str | None]:
    """The server's ``detail`` and ``code`` when the body is the API's error JSON, else
    the raw text and no code."""
    parsed = _parsed_json(raw)
    if isinstance(parsed, dict) and isinstance(parsed.get("detail"), str):
        code = parsed.get("code")
        return _one_line(parsed["detail"]), code if isinstance(code, str) else None
    text = raw.decode("utf-8", errors="replace")
    return _one_line(text)[:MAX_RAW_DETAIL_CHARS] or reason, None


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def _seconds(value: float) -> str:
    return f"{value:g} s"


@dataclass(frozen=True)
class ProjectAdvice:
    """A sentence to add to a 404 that says project ``label`` (``ws/proj``) was not found."""

    label: str
    advice: str

    def applies_to(self, code: str | None, detail: str) -> bool:
        # The server's 404 names the project it did not find; a request that names two
        # (a send) may be refused for either.
        return code == PROJECT_NOT_FOUND_CODE and detail.startswith(f"project {self.label} ")


@dataclass(frozen=True)
class ApiClient:
    """The JSON API at ``base_url``. ``timeout_seconds``, when given, bounds the wait for
    an answer (the connect too) of every request, as a hook needs; else each request
    waits as its method may need (see ``read_timeout``)."""

    base_url: str
    token: str = ""
    timeout_seconds: float | None = None
    connect_timeout_seconds: float = CONNECT_TIMEOUT_SECONDS
    project_advice: ProjectAdvice | None = None

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] = os.environ,
        timeout_seconds: float | None = None,
        *,
        project_advice: ProjectAdvice | None = None,
    ) -> ApiClient:
        return cls(
            server_url_from(environ),
            auth_token_from(environ),
            timeout_seconds,
            project_advice=project_advice,
        )

    def read_timeout(self, method: str, wait_seconds: float = 0) -> float:
        """How long ``method`` waits for its answer once sent, ``wait_seconds`` (the time
        the request asks the server to wait) included."""
        if self.timeout_seconds is not None:
            base = self.timeout_seconds
        else:
            base = READ_TIMEOUT_SECONDS if method == "GET" else WRITE_TIMEOUT_SECONDS
        return base + wait_seconds

    def get(
        self, path: str, query: Mapping[str, str | int], *, wait_seconds: float = 0
    ) -> dict[str, Any]:
        return self.request("GET", path, query=query, wait_seconds=wait_seconds)

    def post(
        self, path: str, payload: Mapping[str, Any], *, wait_seconds: float = 0
    ) -> dict[str, Any]:
        return self.request("POST", path, payload=payload, wait_seconds=wait_seconds)

    def post_retrying_once(
        self, path: str, payload: Mapping[str, Any], *, wait_seconds: float = 0
    ) -> dict[str, Any]:
        """POST, and once more if no answer came back (connection error, 502/503/504).

        Only for requests the server makes idempotent (a send with its
        ``idempotency_key``, a pop with its ``request_id``): the repeat then answers what
        the first did, so a lost answer never loses or doubles a message. A server that
        took the request and answered nothing in time is not asked again.
        """
        try:
            return self.post(path, payload, wait_seconds=wait_seconds)
        except RetryableError:
            return self.post(path, payload, wait_seconds=wait_seconds)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int] | None = None,
        payload: Mapping[str, Any] | None = None,
        wait_seconds: float = 0,
    ) -> dict[str, Any]:
        """Send one request and return the JSON object the server answered.

        ``wait_seconds`` is how long the request asks the server to wait (a waiting pop);
        the answer is awaited that much longer.
        """
        self._check_base_url()
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": "application/json"}
        data = None
        if payload is not None:
            data = json.dumps(payload).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        read_timeout = self.read_timeout(method, wait_seconds)
        opener = urllib.request.build_opener(
            _TimedHTTPHandler(read_timeout), _TimedHTTPSHandler(read_timeout)
        )
        connect_timeout = min(self.connect_timeout_seconds, read_timeout)
        request_name = f"{method} {path}"
        try:
            with opener.open(request, timeout=connect_timeout) as response:
                raw = response.read()
                content_type = response.headers.get("Content-Type", "")
                status = response.status
        except urllib.error.HTTPError as exc:
            raise self._refusal(request_name, exc) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, _ConnectTimeout):
                raise self._unreachable(
                    f"no connection within {_seconds(connect_timeout)}"
                ) from exc
            raise self._unreachable(exc.reason) from exc
        except TimeoutError as exc:
            raise self._no_answer(request_name, read_timeout) from exc
        except (ConnectionError, HTTPException) as exc:
            raise self._unreachable(exc) from exc
        answer = _parsed_json(raw)
        not_api = _not_the_api(answer, raw, content_type)
        if not_api is not None or not isinstance(answer, dict):
            raise self._not_the_api(request_name, status, not_api or "no JSON object")
        return answer

    def _refusal(self, request_name: str, exc: urllib.error.HTTPError) -> ClientError:
        """The error a non-2xx answer becomes, with what to do about it where we know."""
        raw = exc.read()
        content_type = exc.headers.get("Content-Type", "") if exc.headers else ""
        not_api = _not_the_api(_parsed_json(raw), raw, content_type)
        if exc.code in _WRONG_PLACE_STATUSES and not_api is not None:
            return self._not_the_api(request_name, exc.code, not_api)
        detail, code = _error_detail(raw, exc.reason)
        message = f"{request_name}: server returned {exc.code}: {detail}"
        if exc.code == 401:
            message = f"{_sentence(message)} {self._token_advice()}"
        elif self.project_advice is not None and self.project_advice.applies_to(code, detail):
            message = f"{_sentence(message)} {self.project_advice.advice}"
        error = RetryableError if exc.code in RETRYABLE_STATUSES else ClientError
        return error(message, code=code, status=exc.code)

    def _token_advice(self) -> str:
        if self.token:
            return (
                f"The server refused the token in {AUTH_TOKEN_ENV}: set it to a token from "
                f"{ISSUE_TOKEN_COMMAND}."
            )
        return (
            f"The server requires a bearer token: set {AUTH_TOKEN_ENV} to a token from "
            f"{ISSUE_TOKEN_COMMAND}."
        )

    def _not_the_api(self, request_name: str, status: int, what: str) -> ClientError:
        return ClientError(
            f"{request_name}: the server at {self.base_url} answered {status} with {what}, "
            f"not the ai-memory API: set {SERVER_URL_ENV} to the server's base URL, such as "
            f"{self._base_url_guess()}",
            status=status,
        )

    def _base_url_guess(self) -> str:
        """The URL's scheme, host and port: where the server is, unless it sits under a
        path prefix behind a proxy."""
        parts = urllib.parse.urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.netloc}"

    def _check_base_url(self) -> None:
        try:
            parts = urllib.parse.urlsplit(self.base_url)
            valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:
            valid = False
        if not valid:
            raise ClientError(
                f"invalid {SERVER_URL_ENV} {self.base_url!r}: expected http(s)://HOST[:PORT]"
            )
        path = parts.path.rstrip("/")
        if path == MCP_PATH or path.endswith(MCP_PATH):
            base = urllib.parse.urlunsplit(parts._replace(path=path.removesuffix(MCP_PATH)))
            raise ClientError(
                f"{SERVER_URL_ENV} is {self.base_url}, the server's MCP endpoint: give the "
                f"server's base URL instead ({base})"
            )

    def _no_answer(self, request_name: str, read_timeout: float) -> NoAnswerError:
        return NoAnswerError(
            f"{request_name}: the ai-memory server at {self.base_url} accepted the connection "
            f"but sent no answer within {_seconds(read_timeout)} (the request may or may not "
            "have taken effect)"
        )

    def _unreachable(self, reason: object) -> RetryableError:
        if isinstance(reason, OSError) and reason.strerror:
            text = reason.strerror
        else:
            text = _one_line(str(reason)) or type(reason).__name__
        if isinstance(reason, ConnectionRefusedError):
            text += f" (the server may not be running: start it with {SERVE_COMMAND})"
        return RetryableError(f"cannot reach ai-memory server at {self.base_url}: {text}")
