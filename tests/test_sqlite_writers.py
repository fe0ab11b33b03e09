"""SQLite writers queue on a lock file instead of polling SQLite's busy handler
(``aimemory_site.backends.sqlite3``)."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import httpx
import pytest
from django.db import connection, connections, transaction
from pytest_django.live_server_helper import LiveServer

from messaging.models import Message
from tests.conftest import SEND, make_project
from tests.messaging.test_concurrency import run_together

pytestmark = [
    pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite backend only"),
    pytest.mark.django_db(transaction=True),
]


def test_a_transaction_waits_for_the_writer_lock(db: None) -> None:
    lock_path = f"{connection.settings_dict['NAME']}.writer-lock"
    held = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    began = threading.Event()

    def writer() -> None:
        try:
            with transaction.atomic():
                began.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        # Queued on the lock, not begun: it cannot start while another writer holds it.
        assert not began.wait(timeout=0.5)
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
        os.close(held)
    thread.join(timeout=30)
    assert began.is_set()


@pytest.mark.slow
def test_eight_writers_all_finish_without_database_is_locked(live_server: LiveServer) -> None:
    make_project(None, "default", "project-a")
    make_project(None, "default", "project-b")

    def send_and_pop(i: int, client: httpx.Client) -> list[int]:
        statuses = []
        for n in range(15):
            sent = client.post("/api/v1/messages", json={**SEND, "body": f"writer {i} #{n}"})
            popped = client.post(
                "/api/v1/messages/pop", json={"workspace": "default", "project": "project-b"}
            )
            statuses += [sent.status_code, popped.status_code]
            assert "database is locked" not in sent.text + popped.text
        return statuses

    results = run_together(8, send_and_pop, live_server.url)

    assert [status for batch in results for status in batch].count(500) == 0
    assert {status for batch in results for status in batch} == {200, 201}
    assert Message.objects.count() == 8 * 15
    assert not Message.objects.filter(state=Message.State.PENDING).exists()


def test_connections_leave_checkpoints_to_the_checkpointer(db: None) -> None:
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint")
        assert cursor.fetchone()[0] == 0


def test_commits_are_checkpointed_outside_the_writer_lock(db: None) -> None:
    from aimemory_site.backends.sqlite3.base import CHECKPOINT_EVERY_COMMITS, checkpointer

    project = make_project(None, "default", "project-a")
    runs_before = checkpointer.runs
    for n in range(CHECKPOINT_EVERY_COMMITS):
        with transaction.atomic():
            Message.objects.create(to_project=project, from_project=project, body=f"#{n}")
    with checkpointer.finished:
        assert checkpointer.finished.wait_for(lambda: checkpointer.runs > runs_before, 30)
        result = checkpointer.last_result
    assert result is not None
    _busy, wal_frames, copied = result
    assert wal_frames > 0 and copied > 0  # the WAL was copied back into the database


def test_a_few_large_transactions_are_checkpointed_too(db: None) -> None:
    from aimemory_site.backends.sqlite3.base import CHECKPOINT_EVERY_WAL_GROWTH_BYTES, checkpointer

    project = make_project(None, "default", "project-a")
    with connection.cursor() as cursor:
        # Earlier tests may have left a large WAL file that these writes would fit in
        # without growing it; start from an empty one, as a new server does.
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    runs_before = checkpointer.runs
    body = "x" * 4000
    rows = 2 * CHECKPOINT_EVERY_WAL_GROWTH_BYTES // len(body)
    for _ in range(2):  # far fewer commits than CHECKPOINT_EVERY_COMMITS
        with transaction.atomic():
            Message.objects.bulk_create(
                Message(to_project=project, from_project=project, body=body) for _ in range(rows)
            )
    with checkpointer.finished:
        assert checkpointer.finished.wait_for(lambda: checkpointer.runs > runs_before, 30)


def _lock_file_held_elsewhere(tmp_path: Path) -> tuple[str, int, int]:
    """A lock file, a descriptor holding its lock, and a second descriptor to try with."""
    path = str(tmp_path / "db.writer-lock")
    held = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    return path, held, os.open(path, os.O_RDWR)


def test_a_writer_lock_held_elsewhere_is_tried_until_the_budget_is_spent(
    tmp_path: Path,
) -> None:
    from aimemory_site.backends.sqlite3.base import _flock_polled
    from aimemory_site.db_deadline import Budget

    _path, held, fd = _lock_file_held_elsewhere(tmp_path)
    budget = Budget(0.2)
    try:
        assert not _flock_polled(fd, budget)
        assert budget.remaining < 0.01  # tried until less than a pause was left
        fcntl.flock(held, fcntl.LOCK_UN)
        assert _flock_polled(fd, Budget(0.2))  # free: taken at the first try
    finally:
        os.close(held)
        os.close(fd)


def test_polling_for_the_writer_lock_never_outlasts_the_budget(tmp_path: Path) -> None:
    from aimemory_site.backends.sqlite3.base import _flock_polled
    from aimemory_site.db_deadline import Budget

    _path, held, fd = _lock_file_held_elsewhere(tmp_path)
    budget = Budget(0.0)
    try:
        assert not _flock_polled(fd, budget)
        assert budget.remaining <= 0.0
    finally:
        os.close(held)
        os.close(fd)


def test_the_wal_starts_again_from_its_beginning_under_steady_writes(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PASSIVE checkpoints racing steady writes never finish; past the threshold the
    checkpointer finishes one under the writer lock, so the WAL file stops growing."""
    from aimemory_site.backends.sqlite3 import base

    threshold = 1024 * 1024
    monkeypatch.setattr(base, "CHECKPOINT_RESTART_WAL_BYTES", threshold)
    project = make_project(None, "default", "project-a")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # not the size earlier tests left
    restarts_before = base.checkpointer.restarts
    body = "x" * 4000  # a commit writes about ten pages: some 90 MiB through the WAL
    for _ in range(10 * base.CHECKPOINT_EVERY_COMMITS):
        with transaction.atomic():
            Message.objects.create(to_project=project, from_project=project, body=body)
    assert base.checkpointer.restarts > restarts_before
    # The file holds what the commits between two checkpoints wrote, not all of it.
    assert base._wal_size(str(connection.settings_dict["NAME"])) < 20 * threshold


def test_a_checkpoint_that_holds_the_writer_lock_long_is_logged(
    db: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every writer waits for a RESTART; one past SLOW_CHECKPOINT_SECONDS says so in the
    log, so a tail of seconds can be traced to the disk."""
    from aimemory_site.backends.sqlite3 import base

    monkeypatch.setattr(base, "CHECKPOINT_RESTART_WAL_BYTES", 1)  # every run restarts
    monkeypatch.setattr(base, "SLOW_CHECKPOINT_SECONDS", 0.0)  # and every hold is slow
    caplog.set_level("INFO", logger=base.logger.name)
    project = make_project(None, "default", "project-a")

    def logged() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.getMessage().startswith("SQLite checkpoint held the writer lock for ")
        ]

    with base.checkpointer.finished:  # the run's log line comes before its notify
        for n in range(base.CHECKPOINT_EVERY_COMMITS):
            with transaction.atomic():
                Message.objects.create(to_project=project, from_project=project, body=f"#{n}")
        assert base.checkpointer.finished.wait_for(lambda: bool(logged()), 30)
    assert "every writer waited" in logged()[0]


def test_wal_finish_starts_the_wal_again_from_its_beginning(db: None) -> None:
    """What the retention purge runs between its batches: the pages a batch wrote are
    copied back at once, and the next writer's pages go to the start of the WAL."""
    project = make_project(None, "default", "project-a")
    body = "x" * 4000
    with transaction.atomic():
        Message.objects.bulk_create(
            Message(to_project=project, from_project=project, body=body) for _ in range(500)
        )

    connection.wal_finish()  # type: ignore[attr-defined]  # this project's backend

    Message.objects.create(to_project=project, from_project=project, body="one more")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
        _busy, wal_frames, _copied = cursor.fetchone()
    assert 0 < wal_frames < 50  # one small write's pages, not the 500 rows' as well
