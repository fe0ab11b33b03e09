"""``ai-memory serve`` end to end: a real gunicorn on a free port with a fresh data dir."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from aimemory_site.lib.binding import is_loopback
from tests.servers import (
    background_workers,
    children,
    free_port,
    fresh_postgres_database,
    serving,
    wait_for_workers,
    wait_healthy,
)


def _serve(data_dir: Path, *args: str, **env: str) -> subprocess.Popen[bytes]:
    full_env = {**os.environ, "AI_MEMORY_DATA_DIR": str(data_dir)}
    full_env.pop("AI_MEMORY_ROOT_TOKEN", None)  # anonymous unless given
    full_env.pop("DATABASE_URL", None)  # unless given, SQLite under the data dir
    full_env.update(env)
    return subprocess.Popen(
        [sys.executable, "-m", "aimemory_site.cli.main", "serve", *args],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


@pytest.mark.slow
def test_serve_answers_healthz_from_a_fresh_data_dir(tmp_path: Path) -> None:
    port = free_port()
    proc = _serve(tmp_path / "data", "--bind", f"127.0.0.1:{port}")
    workers = min(os.cpu_count() or 1, 8)
    try:
        assert wait_healthy(f"http://127.0.0.1:{port}/healthz", proc) == 200
        # SQLite: a single-threaded process per core, since writers queue on the lock
        # file beside it.
        wait_for_workers(proc.pid, workers)
        assert len(children(proc.pid)) == workers
        assert len(background_workers(proc.pid)) == 1  # beside them, the background worker
        assert (tmp_path / "data" / "ai-memory.sqlite3").exists()
        assert (tmp_path / "data" / "static" / "admin").is_dir()  # static files collected
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _serve_until_exit(data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``ai-memory serve`` that is expected to refuse: its exit code, stdout and stderr."""
    full_env = {**os.environ, "AI_MEMORY_DATA_DIR": str(data_dir), **env}
    full_env.pop("AI_MEMORY_ROOT_TOKEN", None)
    if "DATABASE_URL" not in env:
        full_env.pop("DATABASE_URL", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "aimemory_site.cli.main",
            "serve",
            "--bind",
            f"127.0.0.1:{free_port()}",
        ],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _start_line(data_dir: Path, **env: str) -> str:
    """The first line ``ai-memory serve`` prints, read before its gunicorn is stopped."""
    port = free_port()
    proc = _serve(data_dir, "--bind", f"127.0.0.1:{port}", "--workers", "1", **env)
    try:
        assert proc.stdout is not None
        return proc.stdout.readline().decode()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _manage(data_dir: Path, *arguments: str) -> None:
    env = {**os.environ, "AI_MEMORY_DATA_DIR": str(data_dir)}
    env.pop("DATABASE_URL", None)
    subprocess.run(
        [sys.executable, "-m", "aimemory_site.cli.main", "manage", *arguments],
        env=env,
        capture_output=True,
        timeout=120,
        check=True,
    )


@pytest.mark.slow
def test_serve_first_says_its_url_database_data_dir_and_auth_mode(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with serving(data_dir, database_prefix="aimemory_start_line") as (port, _):
        line = (data_dir / "server.log").read_text().splitlines()[0]
        database_url = os.environ.get("DATABASE_URL", "")

    assert line.startswith("ai-memory: serving ")
    assert f"http://127.0.0.1:{port}/" in line
    if database_url.startswith("postgres"):
        server = urlsplit(database_url)
        assert "PostgreSQL aimemory_start_line_" in line
        assert f"on {server.hostname}:{server.port or 5432}" in line
        if server.password:
            assert server.password not in line
    else:
        assert f"SQLite {data_dir / 'ai-memory.sqlite3'}" in line
    assert f"data dir {data_dir}" in line
    assert line.endswith("auth: anonymous (no root token, no user tokens)")


@pytest.mark.slow
def test_serve_says_its_public_url_when_set(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    public = "https://memory.example.test/"
    with serving(data_dir, database_prefix="aimemory_public_url", AI_MEMORY_PUBLIC_URL=public):
        line = (data_dir / "server.log").read_text().splitlines()[0]

    assert line.endswith("; public URL https://memory.example.test")


@pytest.mark.slow
def test_the_start_line_says_a_root_token_or_how_many_users_hold_tokens(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    _manage(data_dir, "migrate", "--verbosity", "0")
    _manage(data_dir, "issue_token", "alice", "--create-user")
    _manage(data_dir, "issue_token", "alice", "--name", "second laptop")
    _manage(data_dir, "issue_token", "bob", "--create-user")

    by_users = _start_line(data_dir)
    by_root = _start_line(data_dir, AI_MEMORY_ROOT_TOKEN="a-root-token-of-enough-length")

    assert by_users.rstrip().endswith("auth: 2 users with tokens")
    assert by_root.rstrip().endswith("auth: root token, 2 users with tokens")
    assert "a-root-token" not in by_root


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="needs the PostgreSQL server of DATABASE_URL (the suite's PostgreSQL run)",
)
def test_a_missing_postgresql_database_is_one_line_naming_createdb(tmp_path: Path) -> None:
    server = urlsplit(os.environ["DATABASE_URL"])
    name = f"aimemory_missing_{uuid.uuid4().hex[:12]}"

    refused = _serve_until_exit(
        tmp_path / "data", DATABASE_URL=urlunsplit(server._replace(path=f"/{name}"))
    )

    assert refused.returncode == 1
    assert refused.stdout == ""
    [line] = refused.stderr.splitlines()
    assert f"PostgreSQL database {name} does not exist on {server.hostname}:" in line
    assert f"createdb {name}" in line


@pytest.mark.slow
def test_an_sqlite_file_it_cannot_open_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    database = tmp_path / "a-file" / "ai-memory.sqlite3"

    refused = _serve_until_exit(tmp_path / "data", DATABASE_URL=f"sqlite:///{database}")

    assert refused.returncode == 1
    [line] = refused.stderr.splitlines()
    assert f"cannot open the SQLite database {database}" in line


@pytest.mark.slow
def test_a_data_dir_it_cannot_create_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")

    refused = _serve_until_exit(tmp_path / "a-file" / "data")

    assert refused.returncode == 1
    [line] = refused.stderr.splitlines()
    assert f"cannot create the data dir {tmp_path / 'a-file' / 'data'}" in line


@pytest.mark.slow
def test_a_setting_the_server_refuses_is_one_line(tmp_path: Path) -> None:
    refused = _serve_until_exit(tmp_path / "data", AI_MEMORY_ALLOWED_ORIGINS="*")

    assert refused.returncode == 1
    [line] = refused.stderr.splitlines()
    assert line.startswith("ai-memory: refusing to start: ")
    assert "AI_MEMORY_ALLOWED_ORIGINS" in line


@pytest.mark.slow
def test_one_worker_answers_while_a_request_waits_for_its_body(tmp_path: Path) -> None:
    """A request whose body is still on its way holds a greenlet of the only worker,
    never the worker: ``/healthz`` is answered meanwhile."""
    port = free_port()
    proc = _serve(tmp_path / "data", "--bind", f"127.0.0.1:{port}", "--workers", "1")
    try:
        assert wait_healthy(f"http://127.0.0.1:{port}/healthz", proc) == 200
        with socket.create_connection(("127.0.0.1", port), timeout=30) as held:
            held.sendall(
                b"POST /api/v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
            )
            # The held request's greenlet reads the headers, then waits for the other 99
            # bytes; whether it has got that far yet, another greenlet answers this.
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as ok:
                assert ok.status == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="runs when the suite runs on PostgreSQL (DATABASE_URL=postgres://...)",
)
def test_serve_on_postgresql_runs_several_workers(tmp_path: Path) -> None:
    port = free_port()
    with fresh_postgres_database() as database_url:
        proc = _serve(tmp_path / "data", "--bind", f"127.0.0.1:{port}", DATABASE_URL=database_url)
        try:
            assert wait_healthy(f"http://127.0.0.1:{port}/healthz", proc) == 200
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz") as response:
                assert json.load(response)["database"] == "postgresql"
            workers = min((os.cpu_count() or 1) + 1, 8)
            wait_for_workers(proc.pid, workers)
            assert len(children(proc.pid)) == workers
        finally:
            proc.terminate()
            proc.communicate(timeout=30)


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="runs when the suite runs on PostgreSQL (DATABASE_URL=postgres://...)",
)
def test_two_servers_starting_together_on_an_empty_database_both_serve(tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    with fresh_postgres_database() as database_url:
        procs = [
            _serve(
                tmp_path / f"data{n}",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "1",
                DATABASE_URL=database_url,
                SECRET_KEY="shared-by-both-hosts",
            )
            for n, port in enumerate(ports)
        ]
        try:
            for port, proc in zip(ports, procs, strict=True):
                assert wait_healthy(f"http://127.0.0.1:{port}/healthz", proc) == 200
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.communicate(timeout=30)


@pytest.mark.slow
def test_anonymous_serve_refuses_a_public_address(tmp_path: Path) -> None:
    proc = _serve(tmp_path / "data", "--bind", f"0.0.0.0:{free_port()}")
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert b"refusing to serve anonymously" in output


@pytest.mark.slow
def test_serve_refuses_a_setting_its_system_checks_reject(tmp_path: Path) -> None:
    port = free_port()
    proc = _serve(
        tmp_path / "data", "--bind", f"127.0.0.1:{port}", AI_MEMORY_RATE_LIMIT="many/minute"
    )
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert b"refusing to serve" in output
    assert b"projects.E001" in output
    assert not (tmp_path / "data" / "ai-memory.sqlite3").exists()  # before any migration


@pytest.mark.slow
def test_anonymous_serve_on_a_public_address_runs_once_allowed(tmp_path: Path) -> None:
    port = free_port()
    proc = _serve(tmp_path / "data", "--bind", f"0.0.0.0:{port}", AI_MEMORY_ALLOW_ANONYMOUS="1")
    try:
        # Reached over loopback only; 0.0.0.0 includes it.
        assert wait_healthy(f"http://127.0.0.1:{port}/healthz", proc) == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


@pytest.mark.parametrize(
    ("bind", "loopback"),
    [
        ("127.0.0.1:8000", True),
        ("localhost:8000", True),
        ("[::1]:8000", True),
        ("unix:/tmp/sock", True),
        ("0.0.0.0:8000", False),
        ("192.0.2.10:80", False),
        ("example.test:80", False),
    ],
)
def test_is_loopback(bind: str, loopback: bool) -> None:
    assert is_loopback(bind) is loopback
