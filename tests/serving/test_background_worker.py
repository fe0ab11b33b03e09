"""``ai-memory serve`` runs the background worker itself (docs/operating.md#background-work):
a question sent to a served server is told to a real receiver, and at its deadline, on
the real clock, the server sends the asker's fallback within 5 s."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from aimemory_site.lib.decisions import decision_body_write
from tests.receivers import HttpReceiver, http_receiver
from tests.servers import serving, spawn_database_url

__all__ = ["http_receiver"]

pytestmark = pytest.mark.slow

ASKER = {"workspace": "default", "project": "orchestrator"}


def test_a_served_question_is_told_and_its_fallback_sent_at_the_deadline(
    tmp_path: Path, http_receiver: HttpReceiver
) -> None:
    environ = {"AI_MEMORY_NOTIFY_URLS": http_receiver.url("everyone")}
    with serving(tmp_path / "data", database_prefix="aimemory_worker", **environ) as (port, _):
        url = f"http://127.0.0.1:{port}"
        for project in ("operator", "orchestrator"):
            session = {"workspace": "default", "project": project, "session_id": project}
            httpx.post(f"{url}/api/v1/sessions", json=session).raise_for_status()
        body = decision_body_write(
            "Ship the release?",
            [{"id": "ship"}, {"id": "hold"}],
            requires_root=False,
            reply_project="default/orchestrator",
            deadline="60s",
            on_deadline="hold",
        )
        sent = httpx.post(
            f"{url}/api/v1/messages",
            json={
                "to_workspace": "default",
                "to_project": "operator",
                "from_workspace": "default",
                "from_project": "orchestrator",
                "subject": "decision: Ship the release?",
                "body": body,
            },
        )
        sent.raise_for_status()
        question_id = sent.json()["message_id"]
        status = httpx.get(f"{url}/api/v1/messages/{question_id}", params=ASKER).json()
        deadline = time.time() + 60  # within a second of the server's

        told = http_receiver.next(timeout=20)
        assert told.body["title"] == "decision: Ship the release?"
        assert status["expires_at"] is not None

        reply = None
        while reply is None and time.time() < deadline + 15:
            popped = httpx.post(
                f"{url}/api/v1/messages/pop",
                json={**ASKER, "in_reply_to": question_id, "wait_seconds": 30},
                timeout=40,
            ).json()
            reply = popped["message"]
        arrived = time.time()

    assert reply is not None, "no fallback reply came"
    assert arrived - deadline <= 5
    assert reply["decision_reply"]["option"] == "hold"
    assert reply["decision_reply"]["via"] == "deadline"
    assert reply["decision_reply"]["accepted"] is True
    reminder, outcome = http_receiver.next(timeout=20), http_receiver.next(timeout=20)
    assert reminder.body["title"] == "reminder: Ship the release?"  # at 80% of the way
    assert "the asker's fallback hold (hold) was taken" in outcome.body["message"]


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="two hosts share one database only on PostgreSQL",
)
def test_two_hosts_tell_each_question_once(tmp_path: Path, http_receiver: HttpReceiver) -> None:
    environ = {"AI_MEMORY_NOTIFY_URLS": f"{http_receiver.url('a')} {http_receiver.url('b')}"}
    with (
        spawn_database_url("aimemory_two_workers") as database_url,
        serving(tmp_path / "one", database_prefix="", database_url=database_url, **environ) as (
            one,
            _,
        ),
        serving(tmp_path / "two", database_prefix="", database_url=database_url, **environ) as (
            two,
            _,
        ),
    ):
        urls = [f"http://127.0.0.1:{port}" for port in (one, two)]
        for project in ("operator", "orchestrator"):
            session = {"workspace": "default", "project": project, "session_id": project}
            httpx.post(f"{urls[0]}/api/v1/sessions", json=session).raise_for_status()
        asked = []
        for n in range(20):
            body = decision_body_write(
                f"Ship release {n}?",
                [{"id": "ship"}, {"id": "hold"}],
                requires_root=False,
                reply_project="default/orchestrator",
            )
            httpx.post(
                f"{urls[n % 2]}/api/v1/messages",
                json={
                    "to_workspace": "default",
                    "to_project": "operator",
                    "from_workspace": "default",
                    "from_project": "orchestrator",
                    "subject": f"decision: Ship release {n}?",
                    "body": body,
                },
            ).raise_for_status()
            asked.append(f"decision: Ship release {n}?")
        told = [http_receiver.next() for _ in range(2 * len(asked))]
        # Both workers look at the queue twice a second: three looks each for a double.
        time.sleep(1.5)
        told += http_receiver.all_now()

    assert sorted((posted.path, posted.body["title"]) for posted in told) == sorted(
        (path, title) for path in ("a", "b") for title in asked
    )
