"""Requests gunicorn refuses before Django sees them (a request line over its limit, a
header it cannot parse) are answered like every other error of their route: JSON
``{"detail", "code"}`` on the machine routes (a JSON-RPC error on ``/mcp``), gunicorn's
page elsewhere (docs/reference.md#limits-and-faults).

So is a path or a query that is not UTF-8 once percent-decoded, which only the raw
bytes the server hands the application tell apart from text: 400 ``invalid_text``
(docs/reference.md#json-api).

Only a real gunicorn parses HTTP this way, so every test talks to a spawned
``ai-memory serve`` over a raw socket.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import Answer, RawConnection, serving

pytestmark = pytest.mark.slow

#: Longer than gunicorn's limit on a request line (``--limit-request-line``, 4094 bytes).
LONG_QUERY = "workspace=default&project=project-b&pad=" + "x" * 5000


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    data_dir = tmp_path_factory.mktemp("data")
    with serving(data_dir, "--workers", "1", database_prefix="aimemory_unparsable") as (port, _):
        yield port


def exchange(port: int, head: bytes) -> Answer:
    """Send ``head`` (a whole request without a body) on a new connection; its answer."""
    connection = RawConnection(port)
    try:
        connection.send(head)
        return connection.answer()
    finally:
        connection.close()


def request(port: int, method: str, target: str, *header_lines: str) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", *header_lines]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@pytest.mark.parametrize("path", ["/api/v1/messages", "/handoff", "/healthz"])
def test_a_request_line_over_the_limit_is_a_json_414_on_a_machine_route(
    port: int, path: str
) -> None:
    answer = exchange(port, request(port, "GET", f"{path}?{LONG_QUERY}"))

    assert answer.status == 414
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["code"] == "request_line_too_long"
    assert "4094" in answer.json()["detail"]


def test_a_request_line_over_the_limit_is_a_json_rpc_error_on_mcp(port: int) -> None:
    answer = exchange(port, request(port, "POST", f"/mcp?{LONG_QUERY}", "Content-Length: 0"))

    assert answer.status == 414
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == 414
    assert body["error"]["data"] == {"code": "request_line_too_long"}


@pytest.mark.parametrize(
    "bad_header",
    [
        "Bad Header: 1",  # a space in its name
        "X-Trace: one\x00two",  # a NUL in its value
    ],
)
def test_a_header_gunicorn_cannot_parse_is_a_json_rpc_400_on_mcp(
    port: int, bad_header: str
) -> None:
    answer = exchange(
        port, request(port, "POST", "/mcp", "Content-Type: application/json", bad_header)
    )

    assert answer.status == 400
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert body["jsonrpc"] == "2.0"
    assert body["error"]["data"] == {"code": "bad_request"}
    assert body["error"]["message"]


def test_a_header_gunicorn_cannot_parse_is_a_json_400_on_the_api(port: int) -> None:
    answer = exchange(port, request(port, "GET", "/api/v1/messages", "Bad Header: 1"))

    assert answer.status == 400
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["code"] == "bad_request"
    assert set(answer.json()) == {"detail", "code"}


def test_an_unparsable_request_to_a_web_page_keeps_an_html_answer(port: int) -> None:
    too_long = exchange(port, request(port, "GET", f"/web/?{LONG_QUERY}"))
    bad_header = exchange(port, request(port, "GET", "/web/", "Bad Header: 1"))

    assert (too_long.status, bad_header.status) == (414, 400)
    assert too_long.headers["content-type"].startswith("text/html")
    assert bad_header.headers["content-type"].startswith("text/html")


def test_an_unreadable_request_line_is_answered_in_json(port: int) -> None:
    """Nothing says which route was meant: the machine routes' answer is the default."""
    answer = exchange(port, b"\x16\x03\x01 nonsense\r\n\r\n")

    assert answer.status == 400
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["code"] == "bad_request"


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/messages?workspace=default&project=%FF",
        "/handoff?workspace=default&project=project-b&session_id=%C3",
        "/api/v1/%ED%A0%80",
        "/healthz?x=%80",
    ],
)
def test_a_machine_url_that_is_not_utf_8_is_a_json_400_invalid_text(port: int, target: str) -> None:
    answer = exchange(port, request(port, "GET", target))

    assert answer.status == 400
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["code"] == "invalid_text"


def test_an_mcp_url_that_is_not_utf_8_is_a_json_rpc_invalid_text(port: int) -> None:
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    head = request(
        port,
        "POST",
        "/mcp?x=%FF",
        "Content-Type: application/json",
        f"Content-Length: {len(ping)}",
    )

    answer = exchange(port, head + ping)

    assert answer.status == 400
    assert answer.json()["error"]["data"]["code"] == "invalid_text"


@pytest.mark.parametrize("target", ["/web/w/%FF/project-b/", "/web/?x=%C3"])
def test_a_web_url_that_is_not_utf_8_is_our_400_page(port: int, target: str) -> None:
    answer = exchange(port, request(port, "GET", target))

    assert answer.status == 400
    assert answer.headers["content-type"].startswith("text/html")
    assert b'<h1 id="error-heading">Bad request</h1>' in answer.body


@pytest.mark.parametrize("target", ["/api/v1/caf%C3%A9?x=%F0%9F%9A%80", "/api/v1/%25FF?x=%25FF"])
def test_utf_8_and_an_escaped_percent_in_a_url_are_served(port: int, target: str) -> None:
    answer = exchange(port, request(port, "GET", target))

    assert answer.status == 404
    assert answer.json()["code"] == "not_found"
