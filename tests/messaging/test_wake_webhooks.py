"""Wake webhooks (docs/reference.md#wake-webhooks): mail for a project calls its webhook
once per debounce window, never while a session of the project is parked in a session
wait, with counts only; failures are retried and, five in a row, disable it.

Real receivers on loopback (``tests.receivers``), the database queue's real worker
(``tests.background``), real session waits on a live server; the deliveries run with
connections of their own, so these tests commit for real (``transaction=True``)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_tasks_db.models import DBTaskResult
from pytest_django.fixtures import Settings as SettingsWrapper
from pytest_django.live_server_helper import LiveServer

from messaging import wake_webhooks
from messaging.models import SessionWait, WakeWebhook
from messaging.notices import inbox_notice
from messaging.notifications import FAILURES_THAT_DISABLE, RETRY_DELAYS
from messaging.tasks import wake_fire
from messaging.wake_webhooks import SIGNATURE_HEADER, wake_url_refusal, wake_webhook_add
from projects.models import Project
from tests.background import tasks_run_due
from tests.conftest import B
from tests.messaging.conftest import send
from tests.receivers import HttpReceiver, http_receiver

__all__ = ["http_receiver"]  # the fixture

pytestmark = pytest.mark.django_db(transaction=True)

DEBOUNCE = 2
SUBJECT = "secret-subject-7q"
BODY = "secret-body-4k: the export endpoint"


@pytest.fixture(autouse=True)
def _short_debounce_and_loopback(settings: SettingsWrapper) -> None:
    settings.AI_MEMORY_WAKE_DEBOUNCE = DEBOUNCE
    settings.AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS = True


def _url(receiver: HttpReceiver, path: str) -> str:
    return f"http://127.0.0.1:{receiver.port}/{path}"


def _generic(project: Project, receiver: HttpReceiver, path: str = "bot") -> WakeWebhook:
    return wake_webhook_add(project=project, url=_url(receiver, path))


def _queued_wakes() -> list[DBTaskResult[Any, Any]]:
    return list(
        DBTaskResult.objects.filter(task_path=wake_fire.module_path, status="READY").order_by(
            "run_after"
        )
    )


def _burst(count: int) -> list[str]:
    return [str(send(BODY, subject=SUBJECT).pk) for _ in range(count)]


def _verified(webhook: WakeWebhook, raw: bytes, headers: dict[str, str]) -> dict[str, Any]:
    expected = hmac.new(webhook.secret.encode("utf-8"), raw, hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER.lower()] == f"sha256={expected}"
    body: dict[str, Any] = json.loads(raw)
    return body


def test_a_burst_of_fifty_sends_makes_one_signed_post_per_window(
    project_a: Project, project_b: Project, http_receiver: HttpReceiver
) -> None:
    webhook = _generic(project_b, http_receiver)

    ids = _burst(50)
    assert len(_queued_wakes()) == 1  # one wake queued, however many sends
    tasks_run_due()

    [first] = http_receiver.all_now()
    body = _verified(webhook, first.raw, first.headers)
    assert body == {
        "event": "mail",
        "workspace": "default",
        "project": "project-b",
        "pending_message_count": 50,
        "new_message_count": 50,
    }
    # Counts only: no body, subject or message id.
    assert SUBJECT.encode() not in first.raw and b"secret-body" not in first.raw
    assert not any(message_id.encode() in first.raw for message_id in ids)
    assert not any(message_id.replace("-", "").encode() in first.raw for message_id in ids)

    # Fifty more within the window: one wake, due at the window's end, not before.
    sent_at = time.monotonic()
    _burst(50)
    [queued] = _queued_wakes()
    webhook.refresh_from_db()
    assert queued.run_after == webhook.quiet_until == webhook.wake_due_at
    tasks_run_due()
    assert http_receiver.all_now() == []

    time.sleep(max(0.0, DEBOUNCE - (time.monotonic() - sent_at)) + 0.2)
    tasks_run_due()
    [second] = http_receiver.all_now()
    assert _verified(webhook, second.raw, second.headers)["new_message_count"] == 50
    assert json.loads(second.raw)["pending_message_count"] == 100
    assert _queued_wakes() == []


def test_no_post_while_a_session_of_the_project_is_parked(
    project_a: Project,
    project_b: Project,
    http_receiver: HttpReceiver,
    live_server: LiveServer,
    parked: threading.Event,
) -> None:
    _generic(project_b, http_receiver)
    api = httpx.Client(base_url=live_server.url, timeout=60)
    assert api.post("/api/v1/sessions", json={**B, "session_id": "b-1"}).status_code == 200
    answers: list[Any] = []
    waiter = threading.Thread(
        target=lambda: answers.append(
            api.post(
                "/api/v1/sessions/wait", json={**B, "session_id": "b-1", "wait_seconds": 30}
            ).json()
        )
    )
    waiter.start()
    assert parked.wait(10)
    record = SessionWait.objects.get()
    assert record.project_id == project_b.pk
    assert record.parked_until is not None and record.parked_until > timezone.now()

    _burst(50)
    waiter.join(10)
    tasks_run_due()

    assert answers[0]["new_message_count"] >= 1  # the parked session was woken instead
    assert http_receiver.all_now() == []
    # Its wait ended: parked a grace longer, then no more.
    record.refresh_from_db()
    grace = wake_webhooks.PARKED_GRACE.total_seconds()
    assert record.parked_until is not None
    assert 0 < (record.parked_until - timezone.now()).total_seconds() <= grace

    # Once no session is parked, new mail wakes the webhook (after the window).
    SessionWait.objects.update(parked_until=timezone.now() - timedelta(seconds=1))
    _burst(3)
    time.sleep(DEBOUNCE + 0.2)
    tasks_run_due()
    [posted] = http_receiver.all_now()
    assert posted.body["new_message_count"] == 3  # the parked session was told the rest
    assert posted.body["pending_message_count"] == 53
    api.close()


def test_a_claude_routine_gets_its_bearer_and_the_inbox_notice(
    project_a: Project, project_b: Project, http_receiver: HttpReceiver
) -> None:
    wake_webhook_add(
        project=project_b,
        url=_url(http_receiver, "fire"),
        dialect="claude-routine",
        token="sk-ant-oat01-routine-token",
    )

    ids = _burst(2)
    tasks_run_due()

    [posted] = http_receiver.all_now()
    assert posted.headers["authorization"] == "Bearer sk-ant-oat01-routine-token"
    assert posted.headers["anthropic-beta"] == wake_webhooks.ROUTINE_BETA
    assert posted.body == {"text": inbox_notice(count=2, workspace="default", project="project-b")}
    assert SUBJECT.encode() not in posted.raw and b"secret-body" not in posted.raw
    assert not any(message_id.encode() in posted.raw for message_id in ids)


@pytest.mark.parametrize(
    ("url", "allowed", "refused"),
    [
        ("https://hooks.example.com/x", False, False),
        ("https://127.0.0.1/x", False, False),
        ("http://hooks.example.com/x", True, True),
        ("http://10.0.0.5/x", True, True),
        ("http://127.0.0.1:9/x", False, True),
        ("http://127.0.0.1:9/x", True, False),
        ("http://127.8.0.1/x", True, False),
        ("http://[::1]:9/x", True, False),
        ("http://localhost:9/x", True, False),
        ("ftp://hooks.example.com/x", True, True),
        ("https:///nohost", True, True),
        ("not a url", True, True),
    ],
)
def test_only_https_or_loopback_with_the_opt_in(
    settings: SettingsWrapper, url: str, allowed: bool, refused: bool
) -> None:
    settings.AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS = allowed

    assert (wake_url_refusal(url) is not None) == refused


def test_a_loopback_url_is_refused_without_the_opt_in(
    project_b: Project, settings: SettingsWrapper
) -> None:
    settings.AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS = False

    with pytest.raises(ValueError, match="AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS=1"):
        wake_webhook_add(project=project_b, url="http://127.0.0.1:9/bot")

    assert not WakeWebhook.objects.exists()


def test_a_url_no_longer_allowed_is_not_called(
    project_a: Project,
    project_b: Project,
    http_receiver: HttpReceiver,
    settings: SettingsWrapper,
) -> None:
    webhook = _generic(project_b, http_receiver)
    settings.AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS = False

    _burst(1)
    tasks_run_due()

    webhook.refresh_from_db()
    assert http_receiver.all_now() == []
    assert webhook.last_error.startswith("the URL is not accepted now")


def test_a_webhook_that_hangs_times_out_and_counts_as_a_failure(
    project_a: Project,
    project_b: Project,
    http_receiver: HttpReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wake_webhooks, "POST_TIMEOUT", 1.0)
    http_receiver.held.add("bot")
    webhook = _generic(project_b, http_receiver)

    _burst(1)
    started = time.monotonic()
    tasks_run_due()

    assert time.monotonic() - started < 5
    webhook.refresh_from_db()
    assert webhook.failures == 1 and webhook.enabled
    assert webhook.last_error == "no answer within 1 s"
    [retry] = _queued_wakes()
    due_in = (retry.run_after - timezone.now()).total_seconds()
    assert RETRY_DELAYS[0] - 2 <= due_in <= RETRY_DELAYS[0]


def test_a_redirect_is_not_followed_and_counts_as_a_failure(
    project_a: Project, project_b: Project, http_receiver: HttpReceiver
) -> None:
    http_receiver.statuses["bot"] = 302
    http_receiver.locations["bot"] = _url(http_receiver, "elsewhere")
    webhook = _generic(project_b, http_receiver)

    _burst(1)
    tasks_run_due()

    assert [posted.path for posted in http_receiver.all_now()] == ["bot"]  # not "elsewhere"
    webhook.refresh_from_db()
    assert (webhook.failures, webhook.last_error) == (1, "answered HTTP 302")


def test_failures_are_retried_then_the_fifth_in_a_row_disables_the_webhook(
    project_a: Project, project_b: Project, http_receiver: HttpReceiver
) -> None:
    http_receiver.statuses["bot"] = 500
    webhook = _generic(project_b, http_receiver)
    _burst(1)
    tasks_run_due()

    delays = []
    for _ in range(FAILURES_THAT_DISABLE - 1):
        [retry] = _queued_wakes()
        delays.append(round((retry.run_after - timezone.now()).total_seconds()))
        _burst(1)  # mail meanwhile queues nothing more: the retry is the one wake
        assert len(_queued_wakes()) == 1
        # The clock moved: the retry is due.
        DBTaskResult.objects.filter(pk=retry.pk).update(run_after=timezone.now())
        WakeWebhook.objects.filter(pk=webhook.pk).update(wake_due_at=timezone.now())
        tasks_run_due()

    webhook.refresh_from_db()
    assert [abs(d - want) <= 2 for d, want in zip(delays, RETRY_DELAYS, strict=True)] == [
        True
    ] * len(RETRY_DELAYS)
    assert (webhook.enabled, webhook.failures) == (False, FAILURES_THAT_DISABLE)
    assert webhook.disabled_reason == (
        "disabled after 5 failed attempts in a row; the last: answered HTTP 500"
    )
    assert len(http_receiver.all_now()) == FAILURES_THAT_DISABLE
    assert _queued_wakes() == [] and webhook.wake_due_at is None

    _burst(1)  # disabled: nothing is queued or sent
    tasks_run_due()
    assert _queued_wakes() == [] and http_receiver.all_now() == []


def test_a_success_clears_the_run_of_failures(
    project_a: Project, project_b: Project, http_receiver: HttpReceiver
) -> None:
    http_receiver.statuses["bot"] = 503
    webhook = _generic(project_b, http_receiver)
    _burst(1)
    tasks_run_due()
    http_receiver.statuses["bot"] = 204
    WakeWebhook.objects.filter(pk=webhook.pk).update(wake_due_at=timezone.now())

    wake_fire.call(webhook.pk)

    webhook.refresh_from_db()
    assert (webhook.failures, webhook.last_error, webhook.enabled) == (0, "", True)
    assert webhook.last_sent_at is not None
    assert len(http_receiver.all_now()) == 2


def test_racing_workers_make_one_post(
    project_a: Project, project_b: Project, http_receiver: HttpReceiver
) -> None:
    webhook = _generic(project_b, http_receiver)
    _burst(1)
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def worker() -> None:
        try:
            barrier.wait()
            outcomes.append(wake_webhooks.wake_attempt(webhook.pk, lambda at: None))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["not claimed"] * 5 + ["sent"]
    assert len(http_receiver.all_now()) == 1


def test_a_send_to_a_project_without_a_webhook_queues_nothing_and_adds_no_statement(
    project_a: Project, project_b: Project, project_c: Project, http_receiver: HttpReceiver
) -> None:
    _burst(1)  # the first send of the test's connection may look up more
    with CaptureQueriesContext(connection) as without_webhooks:
        _burst(1)
    _generic(project_c, http_receiver)  # another project's

    with CaptureQueriesContext(connection) as queries:
        _burst(1)

    assert _queued_wakes() == []
    # The send's own statements only (tests/messaging/test_query_counts.py pins them).
    assert len(queries) == len(without_webhooks)
    assert not any(query["sql"].lstrip().upper().startswith("UPDATE") for query in queries)


def test_the_housekeeping_queues_again_a_wake_whose_task_is_gone(
    project_a: Project, project_b: Project, http_receiver: HttpReceiver
) -> None:
    from messaging.housekeeping import housekeeping_run

    _generic(project_b, http_receiver)
    _burst(1)
    DBTaskResult.objects.filter(task_path=wake_fire.module_path).delete()
    WakeWebhook.objects.update(wake_due_at=timezone.now() - timedelta(minutes=6))

    housekeeping_run()
    tasks_run_due()

    [posted] = http_receiver.all_now()
    assert posted.body["new_message_count"] == 1
