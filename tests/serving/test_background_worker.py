"""``ai-memory serve`` runs the background worker itself (docs/operating.md#background-work):
a question sent to a served server is told to a real receiver, and at its deadline, on
the real clock, the server sends the asker's fallback within 5 s."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
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


def _ask(url: str, question: str, **deadline: str) -> str:
    """Send ``question`` (options ship and hold) from orchestrator to operator; its id."""
    body = decision_body_write(
        question,
        [{"id": "ship"}, {"id": "hold"}],
        requires_root=False,
        reply_project="default/orchestrator",
        **deadline,
    )
    sent = httpx.post(
        f"{url}/api/v1/messages",
        json={
            "to_workspace": "default",
            "to_project": "operator",
            "from_workspace": "default",
            "from_project": "orchestrator",
            "subject": f"decision: {question}",
            "body": body,
        },
    )
    sent.raise_for_status()
    message_id: str = sent.json()["message_id"]
    return message_id


@pytest.mark.skipif(
    bool(os.environ.get("DATABASE_URL")),
    reason="a minute on the real clock (no deadline is sooner), whose timing is the "
    "background worker's; on PostgreSQL, tests/messaging/test_deadlines.py checks the "
    "deadline's work and test_two_hosts_tell_each_question_once the served worker",
)
def test_a_served_question_is_told_and_its_fallback_sent_at_the_deadline(
    tmp_path: Path, http_receiver: HttpReceiver
) -> None:
    """On the real clock: the fallback of one question arrives within 5 s of its deadline,
    and ``decision wait`` on another, without a fallback, ends within 5 s of its own, exit
    3 (docs/reference.md#deadlines)."""
    everyone = http_receiver.url("everyone")
    with serving(
        tmp_path / "data", database_prefix="aimemory_worker", AI_MEMORY_NOTIFY_URLS=everyone
    ) as (port, _):
        url = f"http://127.0.0.1:{port}"
        for project in ("operator", "orchestrator"):
            session = {"workspace": "default", "project": project, "session_id": project}
            httpx.post(f"{url}/api/v1/sessions", json=session).raise_for_status()
        question_id = _ask(url, "Ship the release?", deadline="60s", on_deadline="hold")
        deadline = time.time() + 60  # within a second of the server's
        unanswered = _ask(url, "Hold the release?", deadline="60s")
        waiting = subprocess.Popen(
            [sys.executable, "-m", "aimemory_site.cli.main", "decision", "wait", unanswered,
             "--timeout", "120", "--workspace", "default", "--project", "orchestrator"],
            env={**os.environ, "AI_MEMORY_SERVER_URL": url},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_ended: list[float] = []

        def watch() -> None:
            waiting.wait()
            wait_ended.append(time.time())

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        status = httpx.get(f"{url}/api/v1/messages/{question_id}", params=ASKER).json()

        reply = None
        while reply is None and time.time() < deadline + 15:
            popped = httpx.post(
                f"{url}/api/v1/messages/pop",
                json={**ASKER, "in_reply_to": question_id, "wait_seconds": 30},
                timeout=40,
            ).json()
            reply = popped["message"]
        arrived = time.time()
        watcher.join(20)
        told = [http_receiver.next(timeout=20) for _ in range(6)]  # 3 events of 2 questions

    assert status["expires_at"] is not None
    assert reply is not None, "no fallback reply came"
    assert arrived - deadline <= 5
    assert reply["decision_reply"]["option"] == "hold"
    assert reply["decision_reply"]["via"] == "deadline"
    assert reply["decision_reply"]["accepted"] is True
    assert waiting.returncode == 3, waiting.stderr.read() if waiting.stderr else ""
    assert wait_ended[0] - deadline <= 5
    assert waiting.stderr is not None
    assert waiting.stderr.read().startswith("no answer by the deadline (")
    titles = sorted(posted.body["title"] for posted in told)
    assert titles == sorted(
        [f"{kind}: {question}" for kind in ("decision", "decision", "reminder")
         for question in ("Ship the release?", "Hold the release?")]
    )  # fmt: skip
    outcomes = [posted.body["message"].split("\n")[0] for posted in told]
    assert any("the asker's fallback hold (hold) was taken" in line for line in outcomes)
    assert any("the question expired unanswered" in line for line in outcomes)


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="two hosts share one database only on PostgreSQL",
)
def test_two_hosts_tell_each_question_once(tmp_path: Path, http_receiver: HttpReceiver) -> None:
    targets = f"{http_receiver.url('a')} {http_receiver.url('b')}"
    with (
        spawn_database_url("aimemory_two_workers") as database_url,
        serving(
            tmp_path / "one",
            database_prefix="",
            database_url=database_url,
            AI_MEMORY_NOTIFY_URLS=targets,
        ) as (
            one,
            _,
        ),
        serving(
            tmp_path / "two",
            database_prefix="",
            database_url=database_url,
            AI_MEMORY_NOTIFY_URLS=targets,
        ) as (
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
