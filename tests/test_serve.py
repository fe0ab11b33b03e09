"""``ai-memory serve`` end to end: a real gunicorn on a free port with a fresh data dir."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from aimemory_site.lib.binding import is_loopback
from tests.servers import (
    children,
    free_port,
    fresh_postgres_database,
    wait_for_workers,
    wait_healthy,
)


def _serve(data_dir: Path, *args: str, **env: str) -> subprocess.Popen[bytes]:
    full_env = {**os.environ, "AI_MEMORY_DATA_DIR": str(data_dir), **env}
    full_env.pop("AI_MEMORY_ROOT_TOKEN", None)
    if "DATABASE_URL" not in env:
        full_env.pop("DATABASE_URL", None)  # the default: SQLite under the data dir
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
    workers = min(2 * (os.cpu_count() or 1), 8)
    try:
        assert wait_healthy(f"http://127.0.0.1:{port}/healthz", proc) == 200
        # SQLite: several single-threaded processes, since writers queue on the lock
        # file beside it.
        wait_for_workers(proc.pid, workers)
        assert len(children(proc.pid)) == workers
        assert (tmp_path / "data" / "ai-memory.sqlite3").exists()
        assert (tmp_path / "data" / "static" / "admin").is_dir()  # static files collected
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


@pytest.mark.slow
def test_threads_let_one_worker_answer_while_a_request_waits_for_its_body(
    tmp_path: Path,
) -> None:
    """``--threads 2``: a request whose body is still on its way holds one thread of the
    only worker, and ``/healthz`` gets the other (with one thread it would wait)."""
    port = free_port()
    proc = _serve(
        tmp_path / "data", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "2"
    )
    try:
        assert wait_healthy(f"http://127.0.0.1:{port}/healthz", proc) == 200
        with socket.create_connection(("127.0.0.1", port), timeout=30) as held:
            held.sendall(
                b"POST /api/v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
            )
            # The held request's thread reads the headers, then waits for the other 99
            # bytes; whether it has got that far yet, the second thread answers this.
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
            workers = min(2 * (os.cpu_count() or 1) + 1, 8)
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
