"""Every failure of a client command says what to do: no server, a server that does not
answer, a missing or refused token, and a server URL that is not the server's base URL.

Servers that misbehave are plain sockets in the test, so each one does exactly one thing.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from pytest_django.live_server_helper import LiveServer

from aimemory_site.cli.client import ApiClient, ClientError
from tests.cli.conftest import RunCli
from tests.conftest import Persona

LIST = ["message", "list", "--workspace", "default", "--project", "project-b"]
QUERY = {"workspace": "default", "project": "project-b"}


class SilentServer:
    """Accepts connections and reads each request, and never answers one."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.requests: list[bytes] = []
        self._received = threading.Condition()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self._held.append(connection)
            request = connection.recv(65536)
            with self._received:
                self.requests.append(request)
                self._received.notify_all()

    def requests_so_far(self) -> list[bytes]:
        """The requests that arrived before this call: a probe sent now is read after all
        of them (one connection at a time), so once it is in, so are they."""
        with socket.create_connection(self.listener.getsockname()) as probe:
            probe.sendall(b"probe")
            with self._received:
                assert self._received.wait_for(lambda: b"probe" in self.requests, timeout=10)
        return self.requests[: self.requests.index(b"probe")]

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in its thread
        self.listener.close()
        for connection in self._held:
            connection.close()
        self._thread.join(timeout=10)


@contextmanager
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    try:
        yield server
    finally:
        server.close()


@contextmanager
def unaccepting_server() -> Iterator[str]:
    """A listener whose accept queue is full, so a new connection is never established."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    address = listener.getsockname()
    fillers = []
    # Linux queues backlog + 1 connections; once the queue is full it drops the next SYN.
    for _ in range(2):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(address)
        fillers.append(filler)
    try:
        yield f"http://127.0.0.1:{address[1]}"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


# ---- no server, or one that does not answer ---------------------------------------------


def test_connection_refused_says_the_server_may_not_be_running(
    offline_cli: RunCli, unreachable_url: str
) -> None:
    result = offline_cli(*LIST)

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"ai-memory: cannot reach ai-memory server at {unreachable_url}: Connection refused "
        "(the server may not be running: start it with `ai-memory serve`)\n"
    )


def test_a_server_that_never_answers_times_out_saying_what_it_waited_for() -> None:
    with silent_server() as server:
        client = ApiClient(server.url, timeout_seconds=0.5)
        with pytest.raises(ClientError) as raised:
            client.get("/api/v1/messages", QUERY)
        [request] = server.requests_so_far()

    assert request.startswith(b"GET /api/v1/messages?")
    assert str(raised.value) == (
        f"GET /api/v1/messages: the ai-memory server at {server.url} accepted the connection "
        "but sent no answer within 0.5 s (the request may or may not have taken effect)"
    )


def test_an_unanswered_request_is_not_repeated() -> None:
    # A server that holds one request would hold the repeat as long: the user would wait
    # twice for the same error.
    with silent_server() as server:
        client = ApiClient(server.url, timeout_seconds=0.3)
        with pytest.raises(ClientError):
            client.post_retrying_once("/api/v1/messages/pop", QUERY)
        requests = server.requests_so_far()

    assert len(requests) == 1


def test_a_connection_that_is_never_established_gives_up_after_the_connect_timeout() -> None:
    with unaccepting_server() as url:
        client = ApiClient(url, timeout_seconds=30, connect_timeout_seconds=0.5)
        with pytest.raises(ClientError) as raised:
            client.get("/api/v1/messages", QUERY)

    assert str(raised.value) == (
        f"cannot reach ai-memory server at {url}: no connection within 0.5 s"
    )


def test_the_cli_connects_within_5_seconds_and_waits_longer_for_an_answer() -> None:
    client = ApiClient.from_environment({})

    assert client.connect_timeout_seconds == 5.0
    assert 5.0 < client.read_timeout("GET") < 30.0
    # An admission webhook may hold a write for up to its 30 s limit.
    assert client.read_timeout("POST") > 30.0
    # A request that asks the server to wait gets the wait on top.
    assert client.read_timeout("POST", wait_seconds=60) == client.read_timeout("POST") + 60


# ---- authentication ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_401_without_a_token_says_to_set_the_token_variable(
    make_cli: Callable[[str], RunCli], live_server: LiveServer, alice: Persona
) -> None:
    result = make_cli(live_server.url)(*LIST)

    assert result.returncode == 1
    assert result.stderr.startswith("ai-memory: GET /api/v1/messages: server returned 401: ")
    assert result.stderr.endswith(
        "The server requires a bearer token: set AI_MEMORY_AUTH_TOKEN to a token from "
        "`ai-memory manage issue_token USER`.\n"
    )


@pytest.mark.django_db(transaction=True)
def test_a_401_with_a_token_says_the_token_was_refused(
    make_cli: Callable[[str], RunCli], live_server: LiveServer, alice: Persona
) -> None:
    env = {"AI_MEMORY_AUTH_TOKEN": "aim_not-a-token"}
    result = make_cli(live_server.url)(*LIST, env=env)

    assert result.returncode == 1
    assert result.stderr.endswith(
        "The server refused the token in AI_MEMORY_AUTH_TOKEN: set it to a token from "
        "`ai-memory manage issue_token USER`.\n"
    )
    assert "aim_not-a-token" not in result.stderr


# ---- a URL that is not the server's base URL --------------------------------------------


def test_a_server_url_ending_in_mcp_says_to_give_the_base_url(
    make_cli: Callable[[str], RunCli], unreachable_url: str
) -> None:
    result = make_cli(f"{unreachable_url}/mcp/")(*LIST)

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"ai-memory: AI_MEMORY_SERVER_URL is {unreachable_url}/mcp, the server's MCP "
        f"endpoint: give the server's base URL instead ({unreachable_url})\n"
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("suffix", "answered"), [("/mcp/x", "a JSON-RPC body"), ("/nowhere", "an HTML page")]
)
def test_a_server_url_that_answers_no_api_says_to_give_the_base_url(
    make_cli: Callable[[str], RunCli], live_server: LiveServer, suffix: str, answered: str
) -> None:
    url = live_server.url + suffix
    result = make_cli(url)(*LIST)

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"ai-memory: GET /api/v1/messages: the server at {url} answered 404 with {answered}, "
        "not the ai-memory API: set AI_MEMORY_SERVER_URL to the server's base URL, such as "
        f"{live_server.url}\n"
    )
