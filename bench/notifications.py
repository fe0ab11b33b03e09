"""``python -m bench.notifications`` (part of ``make bench``): what telling people of
questions costs (docs/reference.md#notifications), on SQLite and, when it answers, on
PostgreSQL. It writes its section of ``docs/benchmarks.md`` (between the markers below)
and ``docs/benchmarks-notifications.json``.

Per database, one server (``ai-memory serve``, its background worker included) with ten
server-wide targets, all ``json://`` to a receiver of the bench's on loopback:

- **Send.** One client sends, alternating, a plain message and a question (which the
  ten targets are told of), a pair every ``PACE_SECONDS``; the p50/p99 of each and their
  ratio, in one run.
- **Notification latency.** From the question's send answered (its commit) to its first
  notification at the receiver: p50 and p99.
- **Deadline fallback.** Questions with a 60 s deadline and a fallback: from each
  deadline to the fallback reply's arrival at the asker (a waiting pop): p50 and p99.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from aimemory_site.lib.decisions import decision_body_write, decision_subject
from bench.run import ROOT, Server, postgres_database

OUTPUT = ROOT / "docs" / "benchmarks.md"
OUTPUT_JSON = ROOT / "docs" / "benchmarks-notifications.json"
BEGIN, END = "<!-- notifications: begin -->", "<!-- notifications: end -->"
TARGETS = 10
SENDS = int(os.environ.get("BENCH_NOTIFY_SENDS", "200"))
DEADLINES = int(os.environ.get("BENCH_NOTIFY_DEADLINES", "20"))
PACE_SECONDS = 0.2
_ID = re.compile(r"bench-([0-9a-f]{32})")


class _Receiver(ThreadingHTTPServer):
    daemon_threads = True
    first_seen: dict[str, float]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        now = time.time()
        match = _ID.search(raw.decode(errors="replace"))
        if match:
            self.server.first_seen.setdefault(match.group(1), now)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _receiver() -> Iterator[_Receiver]:
    server = _Receiver(("127.0.0.1", 0), _Handler)
    server.first_seen = {}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _question(tag: str, **extra: Any) -> dict[str, str]:
    question = f"Ship it? bench-{tag}"
    return {
        "to_workspace": "default",
        "to_project": "operator",
        "from_workspace": "default",
        "from_project": "orchestrator",
        "subject": decision_subject(question),
        "body": decision_body_write(
            question,
            [{"id": "ship"}, {"id": "hold"}],
            requires_root=False,
            reply_project="default/orchestrator",
            **extra,
        ),
    }


def _measure(database_url: str | None) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="bench-notify-"))
    with _receiver() as receiver:
        port = receiver.server_address[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AI_MEMORY_")}
        env.pop("DATABASE_URL", None)
        env["AI_MEMORY_DATA_DIR"] = str(work / "data")
        env["AI_MEMORY_NOTIFY_URLS"] = " ".join(
            f"json://127.0.0.1:{port}/target-{n}" for n in range(TARGETS)
        )
        if database_url:
            env["DATABASE_URL"] = database_url
        server = Server(env, work / "server.log")
        try:
            return _run(server, receiver)
        finally:
            server.stop()


def _run(server: Server, receiver: _Receiver) -> dict[str, float]:
    client = httpx.Client(base_url=server.base, timeout=60)
    for project in ("operator", "orchestrator"):
        session = {"workspace": "default", "project": project, "session_id": project}
        client.post("/api/v1/sessions", json=session).raise_for_status()
    plain: list[float] = []
    asked: list[float] = []
    answered_at: dict[str, float] = {}
    for n in range(SENDS):
        for kind in ("plain", "question") if n % 2 == 0 else ("question", "plain"):
            tag = uuid.uuid4().hex
            payload = (
                _question(tag)
                if kind == "question"
                else {**_question(tag), "subject": "plain", "body": "Please add an endpoint."}
            )
            started = time.perf_counter()
            client.post("/api/v1/messages", json=payload).raise_for_status()
            took = time.perf_counter() - started
            (asked if kind == "question" else plain).append(took * 1000)
            if kind == "question":
                answered_at[tag] = time.time()
        # Questions come one at a time, as people are asked: the latency measured is a
        # notification's, not that of a queue a burst built up.
        time.sleep(PACE_SECONDS)
        if n % 50 == 49:  # keep the mailbox under its bound of 256 pending
            for _ in range(100):
                client.post(
                    "/api/v1/messages/pop", json={"workspace": "default", "project": "operator"}
                )
    deadline = time.time() + 30
    while len(set(answered_at) & set(receiver.first_seen)) < len(answered_at):
        if time.time() > deadline:
            break
        time.sleep(0.2)
    latencies = [
        (receiver.first_seen[tag] - at) * 1000
        for tag, at in answered_at.items()
        if tag in receiver.first_seen
    ]
    fallback = _deadlines(client)
    return {
        "send_plain_p50_ms": statistics.median(plain),
        "send_plain_p99_ms": _percentile(plain, 0.99),
        "send_question_p50_ms": statistics.median(asked),
        "send_question_p99_ms": _percentile(asked, 0.99),
        "send_p99_ratio": _percentile(asked, 0.99) / _percentile(plain, 0.99),
        "notified": len(latencies) / len(answered_at),
        "notify_p50_ms": statistics.median(latencies),
        "notify_p99_ms": _percentile(latencies, 0.99),
        "fallback_p50_s": statistics.median(fallback),
        "fallback_p99_s": _percentile(fallback, 0.99),
        "fallback_count": len(fallback),
    }


def _deadlines(client: httpx.Client) -> list[float]:
    """Seconds from each question's deadline to its fallback reply at the asker."""
    deadlines: dict[str, float] = {}
    for _ in range(DEADLINES):
        sent = client.post(
            "/api/v1/messages",
            json=_question(uuid.uuid4().hex, deadline="60s", on_deadline="hold"),
        )
        sent.raise_for_status()
        question_id = sent.json()["message_id"]
        status = client.get(
            f"/api/v1/messages/{question_id}",
            params={"workspace": "default", "project": "orchestrator"},
        ).json()
        deadlines[question_id] = (
            time.time() if status["expires_at"] is None else _epoch(status["expires_at"])
        )
    late: list[float] = []
    give_up = max(deadlines.values()) + 30
    while len(late) < len(deadlines) and time.time() < give_up:
        popped = client.post(
            "/api/v1/messages/pop",
            json={"workspace": "default", "project": "orchestrator", "wait_seconds": 10},
        ).json()["message"]
        if popped and popped.get("in_reply_to") in deadlines:
            late.append(time.time() - deadlines[popped["in_reply_to"]])
    return late


def _epoch(rfc3339: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(rfc3339).timestamp()


def _section(results: dict[str, dict[str, float]]) -> str:
    lines = [
        BEGIN,
        "## Notifications of questions",
        "",
        f"`python -m bench.notifications` (in `make bench`): one server, its background "
        f"worker, {TARGETS} server-wide `json://` targets to a receiver on loopback; one "
        f"client, {SENDS} plain sends and {SENDS} questions alternating, a pair every "
        f"{PACE_SECONDS:g} s; {DEADLINES} "
        "questions with a 60 s deadline and a fallback.",
        "",
        "| database | send p99, plain / question (ms) | ratio | notified | notification "
        "p50 / p99 (ms) | fallback after the deadline p50 / p99 (s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['send_plain_p99_ms']:.1f} / {r['send_question_p99_ms']:.1f} | "
            f"{r['send_p99_ratio']:.2f} | {r['notified']:.0%} | {r['notify_p50_ms']:.0f} / "
            f"{r['notify_p99_ms']:.0f} | {r['fallback_p50_s']:.2f} / "
            f"{r['fallback_p99_s']:.2f} |"
        )
    lines += [
        "",
        "The ratio compares a question (whose send also parses it and queues one task, "
        "one more insert) with a plain send, both measured in the same run, and does not "
        "depend on the targets: the send never reads them. The notification latency is "
        "bounded by the worker's look at the queue every 0.5 s and the deliveries' own "
        "time (ten posts at once); the fallback's by the same look, and it wakes the "
        "asker's parked pop as any send does.",
        END,
    ]
    return "\n".join(lines)


def main() -> None:
    results: dict[str, dict[str, float]] = {"SQLite": _measure(None)}
    with postgres_database() as url:
        if url is not None:
            results["PostgreSQL"] = _measure(url)
    OUTPUT_JSON.write_text(json.dumps(results, indent=2) + "\n")
    section = _section(results)
    text = OUTPUT.read_text() if OUTPUT.exists() else ""
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    OUTPUT.write_text(text)
    print(section)


if __name__ == "__main__":
    main()
