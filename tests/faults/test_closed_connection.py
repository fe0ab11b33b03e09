"""A PostgreSQL connection the server closed is replaced before a request uses it, and a
connection in good order is kept without asking the server (``DatabaseWrapper.is_usable``
of ``aimemory_site.backends.postgresql``, which Django's ``CONN_HEALTH_CHECKS`` calls)."""

from __future__ import annotations

import json
import os
import select
import time
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from tests.servers import free_port, fresh_postgres_database, wait_healthy
from tests.test_serve import _serve

pytestmark = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="the PostgreSQL backend only",
)


def _terminate(backend_pids: list[int]) -> None:
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as admin:
        for pid in backend_pids:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])


def _last_statement(pid: int) -> str:
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as admin:
        row = admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.django_db(transaction=True)
def test_an_idle_connection_in_good_order_is_kept_without_a_statement() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'the last statement before the check'")
    pid = connection.connection.info.backend_pid

    assert connection.is_usable()

    assert _last_statement(pid) == "SELECT 'the last statement before the check'"


@pytest.mark.django_db(transaction=True)
def test_a_connection_whose_backend_was_terminated_is_not_usable() -> None:
    connection.ensure_connection()
    raw = connection.connection
    _terminate([raw.info.backend_pid])
    # The server's goodbye (its last error, then the end of the stream) arrives on the
    # socket: wait for it there, not for a guessed time.
    readable, _, _ = select.select([raw.pgconn.socket], [], [], 10)
    assert readable

    try:
        assert not connection.is_usable()
    finally:
        connection.close()


def _get_json(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.slow
def test_a_served_request_after_its_connection_was_terminated_succeeds(tmp_path: Path) -> None:
    """One worker of one thread keeps one connection; the server ends it between two
    requests, and the second is answered on a new one instead of failing on the old."""
    with fresh_postgres_database() as url:
        database = url.rsplit("/", 1)[1]
        port = free_port()
        proc = _serve(
            tmp_path / "data",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            DATABASE_URL=url,
        )
        try:
            health = f"http://127.0.0.1:{port}/healthz"
            assert wait_healthy(health, proc) == 200
            with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as admin:
                pids = [
                    row[0]
                    for row in admin.execute(
                        "SELECT pid FROM pg_stat_activity WHERE datname = %s", [database]
                    )
                ]
            assert pids, "the worker keeps its connection between requests"
            _terminate(pids)
            deadline = time.monotonic() + 10
            with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as admin:
                while admin.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]
                ).fetchone():
                    assert time.monotonic() < deadline, "the backends did not end"
                    time.sleep(0.05)  # another process's exit: only polling tells

            status, body = _get_json(health)

            assert (status, body) == (200, {"status": "ok", "database": "postgresql"})
        finally:
            proc.terminate()
            proc.wait(timeout=30)
