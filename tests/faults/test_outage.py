"""A PostgreSQL outage, refused and stalled, answers fast on every surface and heals by
itself (docs/reference.md#limits-and-faults; ``aimemory_site.db_deadline``).

The test owns its PostgreSQL: ``initdb`` into a temporary directory, started on a free port
with the system's ``pg_ctl`` and stopped after (never the shared instance). A spawned
``ai-memory serve`` reaches it through a TCP proxy of the test's own, which can stall:
keep accepting and reading, and answer nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from aimemory_site.db_deadline import REQUEST_DATABASE_SECONDS
from tests.conftest import SEND
from tests.mcp_raw import HANDSHAKE_VERSION
from tests.servers import free_port, wait_healthy

# docs/reference.md#limits-and-faults: every route answers within this, whatever the database does.
ANSWER_BOUND_S = 5.0
B = {"workspace": "default", "project": "project-b"}
#: Requests sent at once in the stall test.
STALLED_REQUESTS = 12


def _postgres_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(candidates[-1]) if candidates else None


INITDB, PG_CTL = _postgres_bin("initdb"), _postgres_bin("pg_ctl")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        INITDB is None or PG_CTL is None, reason="needs PostgreSQL's initdb and pg_ctl"
    ),
]


class OwnedPostgres:
    """A PostgreSQL instance of this test alone, in a temporary directory.

    PostgreSQL refuses to run as root; as root, its commands run as the ``postgres`` user.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self._as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as_owner:
            shutil.chown(root, user="postgres")
        self._run(INITDB, "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    def _run(self, *argv: str | None) -> None:
        subprocess.run(
            [*self._as_owner, *(str(a) for a in argv)], check=True, capture_output=True, timeout=60
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off -c synchronous_commit=off"
        )
        log = str(self.root / "postgres.log")
        self._run(PG_CTL, "-D", str(self.data), "-l", log, "-o", options, "-w", "-t", "30", "start")

    def stop(self) -> None:
        self._run(PG_CTL, "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def url(self, port: int | None = None, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{port or self.port}/{database}"


class StallingProxy:
    """A TCP proxy in front of the instance that can stall.

    Stalled, it still accepts connections and reads what clients send, and forwards and
    answers nothing, on new and on live connections: a server that hangs. Resumed, what
    it read goes through. With the instance down, a new connection is closed at once.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._listener.close()
        self._flowing.set()
        for sock in self._sockets:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            self._sockets.append(client)
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                client.close()  # the instance is down: as a refused connection looks
                continue
            upstream.settimeout(None)
            self._sockets.append(upstream)
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                self._flowing.wait()
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@dataclass
class Outage:
    postgres: OwnedPostgres
    proxy: StallingProxy
    database_url: str  # through the proxy
    base_url: str
    data_dir: Path


@pytest.fixture(scope="module")
def outage() -> Iterator[Outage]:
    root = Path(tempfile.mkdtemp(prefix="ai-memory-outage-"))
    postgres = OwnedPostgres(root)
    postgres.start()
    proxy = StallingProxy(postgres.port)
    server: subprocess.Popen[bytes] | None = None
    try:
        with psycopg.connect(postgres.url(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE aimemory")
        database_url = postgres.url(proxy.port, "aimemory")
        port = free_port()
        data_dir = root / "server"
        env = {**os.environ, "AI_MEMORY_DATA_DIR": str(data_dir), "DATABASE_URL": database_url}
        env.pop("AI_MEMORY_ROOT_TOKEN", None)
        server = subprocess.Popen(
            [
                *(sys.executable, "-m", "aimemory_site.cli.main", "serve"),
                *("--bind", f"127.0.0.1:{port}", "--workers", "1"),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base_url = f"http://127.0.0.1:{port}"
        assert wait_healthy(f"{base_url}/healthz", server, deadline_s=90) == 200
        with httpx.Client(base_url=base_url, timeout=30) as client:
            for name in ("project-a", "project-b"):
                started = client.post(
                    "/api/v1/sessions",
                    json={"workspace": "default", "project": name, "session_id": f"s-{name}"},
                )
                assert started.status_code == 200, started.text
        yield Outage(postgres, proxy, database_url, base_url, data_dir)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        proxy.close()
        if postgres.running():
            postgres.stop()
        shutil.rmtree(root, ignore_errors=True)


def _mcp(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


_MCP_HEADERS = {"MCP-Protocol-Version": HANDSHAKE_VERSION, "Accept": "application/json"}
_MCP_LIST = _mcp("tools/call", {"name": "memory_message_list", "arguments": B})


def _timed(client: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
    started = time.monotonic()
    response = client.request(method, path, **kwargs)
    elapsed = time.monotonic() - started
    assert elapsed < ANSWER_BOUND_S, f"{method} {path} took {elapsed:.1f}s"
    return response


def _assert_every_surface_unavailable(base_url: str, database_state: str) -> None:
    """REST, MCP, /healthz and a web page all answer 503 of their kind within the bound."""
    # A client timeout above the bound, so that a hang fails the assertion, not the run.
    with httpx.Client(base_url=base_url, timeout=ANSWER_BOUND_S * 3) as client:
        for method, path, kwargs in [
            ("POST", "/api/v1/messages", {"json": SEND}),
            ("GET", "/api/v1/messages", {"params": B}),
        ]:
            response = _timed(client, method, path, **kwargs)
            assert response.status_code == 503, (path, response.text)
            assert response.json()["code"] == "database_unavailable"
        for body in (_mcp("ping"), _MCP_LIST):
            response = _timed(client, "POST", "/mcp", json=body, headers=_MCP_HEADERS)
            assert response.status_code == 503, (body["method"], response.text)
            assert response.json()["jsonrpc"] == "2.0"
            assert response.json()["error"]["data"]["code"] == "database_unavailable"
        health = _timed(client, "GET", "/healthz")
        assert health.status_code == 503
        assert health.json()["code"] == "database_unavailable"
        assert health.json()["database"] == database_state
        page = _timed(client, "GET", "/web/")
        assert page.status_code == 503
        assert "The database is unavailable" in page.text


def _assert_every_surface_answers(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=ANSWER_BOUND_S * 3) as client:
        sent = _timed(client, "POST", "/api/v1/messages", json=SEND)
        assert sent.status_code == 201, sent.text
        listed = _timed(client, "GET", "/api/v1/messages", params=B)
        assert sent.json()["message_id"] in [m["id"] for m in listed.json()["messages"]]
        for body in (_mcp("ping"), _MCP_LIST):
            response = _timed(client, "POST", "/mcp", json=body, headers=_MCP_HEADERS)
            assert response.status_code == 200, response.text
            assert "error" not in response.json()
        health = _timed(client, "GET", "/healthz")
        assert health.json() == {"status": "ok", "database": "postgresql"}
        assert _timed(client, "GET", "/web/").status_code == 200


def _wait_until_healthy(base_url: str) -> None:
    """The instance was just started again: the server's next requests find it."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if httpx.get(f"{base_url}/healthz", timeout=ANSWER_BOUND_S * 3).status_code == 200:
            return
        time.sleep(0.2)  # polling a server process we do not control; no barrier exists
    raise AssertionError("the server did not recover within 30 s of the database's return")


def test_a_refused_database_is_503_everywhere_and_heals_without_a_restart(
    outage: Outage,
) -> None:
    _assert_every_surface_answers(outage.base_url)  # a pooled connection is open

    outage.postgres.stop()
    try:
        _assert_every_surface_unavailable(outage.base_url, "unreachable")
    finally:
        outage.postgres.start()

    _wait_until_healthy(outage.base_url)
    _assert_every_surface_answers(outage.base_url)


def test_after_the_database_returns_no_request_fails_once_one_has_succeeded(
    outage: Outage,
) -> None:
    """The process keeps spare connections for its next requests; a restart of the
    database closes them all. Each is checked as it is handed out, so once the server
    answers again, no later request meets a dead one (no false 503)."""

    def listed(_: int) -> int:
        with httpx.Client(base_url=outage.base_url, timeout=ANSWER_BOUND_S * 3) as client:
            return client.get("/api/v1/messages", params=B).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(listed, range(32))) == {200}  # several connections, kept
        outage.postgres.stop()
        outage.postgres.start()
        _wait_until_healthy(outage.base_url)

        assert list(pool.map(listed, range(64))) == [200] * 64


def test_a_stalled_database_is_503_everywhere_in_time_and_heals_without_a_restart(
    outage: Outage,
) -> None:
    _assert_every_surface_answers(outage.base_url)  # a pooled connection is open

    outage.proxy.stall()
    try:
        _assert_every_surface_unavailable(outage.base_url, "timeout")
    finally:
        outage.proxy.resume()

    _assert_every_surface_answers(outage.base_url)


def test_a_command_outside_a_request_outlasts_the_request_budget(outage: Outage) -> None:
    """Migrations and management commands are not cut off: only requests have a budget."""
    script = (
        "from django.db import connection\n"
        "cursor = connection.cursor()\n"
        "cursor.execute('SELECT 1')\n"
        "print('connected', flush=True)\n"
        "input()\n"
        "cursor.execute('SELECT 2')\n"
        "print('answered', cursor.fetchone()[0], flush=True)\n"
    )
    env = {
        **os.environ,
        "AI_MEMORY_DATA_DIR": str(outage.data_dir),
        "DATABASE_URL": outage.database_url,
    }
    command = subprocess.Popen(
        [sys.executable, "-m", "aimemory_site.cli.main", "manage", "shell", "-c", script],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert command.stdin is not None and command.stdout is not None
    try:
        for line in command.stdout:  # after django-axes' banner
            if line == b"connected\n":
                break
        outage.proxy.stall()
        command.stdin.write(b"\n")
        command.stdin.flush()
        # The query waits on the silent server past any request's budget, and lives.
        with pytest.raises(subprocess.TimeoutExpired):
            command.wait(timeout=REQUEST_DATABASE_SECONDS + 1.5)
    finally:
        outage.proxy.resume()
    output, _ = command.communicate(timeout=30)
    assert command.returncode == 0, output.decode()
    assert b"answered 2" in output


def test_healthz_keeps_its_keys_when_the_database_is_unavailable(outage: Outage) -> None:
    outage.proxy.stall()
    try:
        response = httpx.get(f"{outage.base_url}/healthz", timeout=ANSWER_BOUND_S * 3)
    finally:
        outage.proxy.resume()
    body = json.loads(response.text)
    assert set(body) == {"detail", "code", "status", "database"}
    assert body["status"] == "error"


def test_in_a_stall_many_requests_at_once_all_answer_in_time(outage: Outage) -> None:
    """A dozen requests at once on the one worker: each waits for the stalled database
    in its own greenlet, none behind another, and all answer 503 within the bound."""
    _assert_every_surface_answers(outage.base_url)
    requests = STALLED_REQUESTS
    together = threading.Barrier(requests)
    answers: list[tuple[int, str, float]] = []

    def list_messages() -> None:
        with httpx.Client(base_url=outage.base_url, timeout=ANSWER_BOUND_S * 4) as client:
            together.wait()
            started = time.monotonic()
            response = client.get("/api/v1/messages", params=B)
            code = response.json().get("code", "") if response.status_code != 200 else ""
            answers.append((response.status_code, code, time.monotonic() - started))

    outage.proxy.stall()
    try:
        clients = [threading.Thread(target=list_messages) for _ in range(requests)]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
    finally:
        outage.proxy.resume()

    assert len(answers) == requests
    assert {(status, code) for status, code, _ in answers} == {(503, "database_unavailable")}
    slowest = max(elapsed for _, _, elapsed in answers)
    assert slowest < ANSWER_BOUND_S, f"the slowest of {requests} took {slowest:.1f}s"
    _assert_every_surface_answers(outage.base_url)
