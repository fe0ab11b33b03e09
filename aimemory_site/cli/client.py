"""A small JSON client for the ai-memory API, on the standard library only.

Every failure becomes a ``ClientError`` whose message is one line a person can act on:
the commands print it to stderr and exit 1, never a traceback.
"""

from __future__ import annotations

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
# Long enough for a busy server, short enough that a stuck one does not hang a shell.
DEFAULT_TIMEOUT_SECONDS = 30.0
# Error bodies that are not the API's JSON (a proxy's HTML page) are cut to this.
MAX_RAW_DETAIL_CHARS = 200


class ClientError(CliError):
    """A request that did not produce a usable answer. ``code`` is the machine code of the
    server's JSON error body, if it sent one, so a command can say what the failure means
    for it."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class RetryableError(ClientError):
    """No answer reached us, or a proxy said the server was away (502, 503, 504): the
    request may or may not have happened, so only an idempotent request may be repeated."""


# A gateway's way of saying the server did not answer; the request may have happened.
RETRYABLE_STATUSES = frozenset({502, 503, 504})


def server_url_from(environ: Mapping[str, str]) -> str:
    return (environ.get(SERVER_URL_ENV, "").strip() or DEFAULT_SERVER_URL).rstrip("/")


def auth_token_from(environ: Mapping[str, str]) -> str:
    return environ.get(AUTH_TOKEN_ENV, "").strip()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _error_detail(raw: bytes, reason: str) -> tuple[str, str | None]:
    """The server's ``detail`` and ``code`` when the body is the API's error JSON, else
    the raw text and no code."""
    text = raw.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("detail"), str):
        code = parsed.get("code")
        return _one_line(parsed["detail"]), code if isinstance(code, str) else None
    return _one_line(text)[:MAX_RAW_DETAIL_CHARS] or reason, None


@dataclass(frozen=True)
class ApiClient:
    base_url: str
    token: str = ""
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] = os.environ,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> ApiClient:
        return cls(server_url_from(environ), auth_token_from(environ), timeout_seconds)

    def get(self, path: str, query: Mapping[str, str | int]) -> dict[str, Any]:
        return self.request("GET", path, query=query)

    def post(self, path: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        return self.request("POST", path, payload=payload)

    def post_retrying_once(self, path: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """POST, and once more if no answer came back (connection error, 502/503/504).

        Only for requests the server makes idempotent (a send with its
        ``idempotency_key``, a pop with its ``request_id``): the repeat then answers what
        the first did, so a lost answer never loses or doubles a message.
        """
        try:
            return self.post(path, payload)
        except RetryableError:
            return self.post(path, payload)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int] | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Send one request and return the JSON object the server answered."""
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
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail, code = _error_detail(exc.read(), exc.reason)
            error = RetryableError if exc.code in RETRYABLE_STATUSES else ClientError
            raise error(
                f"{method} {path}: server returned {exc.code}: {detail}", code=code
            ) from exc
        except urllib.error.URLError as exc:
            raise self._unreachable(exc.reason) from exc
        except (TimeoutError, ConnectionError, HTTPException) as exc:
            raise self._unreachable(exc) from exc
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise ClientError(f"{method} {path}: server answered with invalid JSON") from exc
        if not isinstance(answer, dict):
            raise ClientError(f"{method} {path}: server answered with unexpected JSON")
        return answer

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

    def _unreachable(self, reason: object) -> RetryableError:
        if isinstance(reason, OSError) and reason.strerror:
            text = reason.strerror
        else:
            text = _one_line(str(reason)) or type(reason).__name__
        return RetryableError(f"cannot reach ai-memory server at {self.base_url}: {text}")
