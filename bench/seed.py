"""Data for ``make bench``, written straight into the server's database.

Run as ``python -m bench.seed COMMAND ...`` with the server's environment (data dir,
``DATABASE_URL``), beside the running server: rows are made in bulk SQL, since stocking
inboxes through the API would take longer than the measurements.

Commands: ``projects SINKS``, ``parking COUNT [HERDS]``, ``stock SINKS PER_INBOX``, ``refill TOTAL TARGET``,
``history ROWS PROJECTS``, ``purge DAYS``, ``web PROJECTS PENDING``, ``hot-claims``, ``web-queries``,
``size``, ``settle``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aimemory_site.settings")
django.setup()

from django.db import connection, transaction  # noqa: E402
from django.db.models import Max, Min  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from aimemory_site.lib.ids import uuid7  # noqa: E402
from messaging.models import Message  # noqa: E402
from messaging.retention import messages_purge  # noqa: E402
from projects.models import Project, Workspace  # noqa: E402

BODY = "Please add a /v1/export endpoint that streams NDJSON. " * 18


def _bench() -> Workspace:
    return Workspace.objects.get_or_create(name="bench")[0]


def projects(sinks: int) -> None:
    """bench/sender, bench/hot, bench/sink-N and bench/stock-N."""
    workspace = _bench()
    existing = set(Project.objects.filter(workspace=workspace).values_list("name", flat=True))
    names = ["sender", "hot"] + [f"{kind}-{n}" for kind in ("sink", "stock") for n in range(sinks)]
    Project.objects.bulk_create(
        Project(workspace=workspace, name=name) for name in names if name not in existing
    )


def parking(count: int, herds: int = 24) -> None:
    """bench/park-N (inboxes pops park on, never sent to), bench/herd-N (one inbox of
    parked pops and sends each), bench/wake and bench/burst."""
    workspace = _bench()
    existing = set(Project.objects.filter(workspace=workspace).values_list("name", flat=True))
    names = ["wake", "burst"] + [f"park-{n}" for n in range(count)]
    names += [f"herd-{n}" for n in range(herds)]
    Project.objects.bulk_create(
        (Project(workspace=workspace, name=name) for name in names if name not in existing),
        batch_size=1000,
    )


def _messages(to: Project, sender: Project, count: int, **fields: Any) -> list[Message]:
    return [Message(to_project=to, from_project=sender, body=BODY, **fields) for _ in range(count)]


def stock(sinks: int, per_inbox: int) -> None:
    """Top every bench/stock-N inbox up to ``per_inbox`` pending messages."""
    workspace = _bench()
    sender = Project.objects.get(workspace=workspace, name="sender")
    for n in range(sinks):
        inbox = Project.objects.get(workspace=workspace, name=f"stock-{n}")
        missing = per_inbox - Message.objects.pending().inbox_of(inbox).count()
        if missing > 0:
            Message.objects.bulk_create(_messages(inbox, sender, missing), batch_size=500)


def refill(total: int, target: int) -> None:
    """Keep bench/hot at ``target`` pending until ``total`` messages went in; then stop."""
    workspace = _bench()
    sender = Project.objects.get(workspace=workspace, name="sender")
    hot = Project.objects.get(workspace=workspace, name="hot")
    inserted = 0
    while inserted < total:
        missing = min(target - Message.objects.pending().inbox_of(hot).count(), total - inserted)
        if missing > 0:
            Message.objects.bulk_create(_messages(hot, sender, missing), batch_size=500)
            inserted += missing
        else:
            time.sleep(0.005)  # the poppers are draining; nothing to wait on but the count
    print(json.dumps({"inserted": inserted}))


def history(rows: int, project_count: int) -> None:
    """``rows`` claimed, cancelled and expired messages over ``project_count`` projects,
    90 to 32 days old."""
    workspace = Workspace.objects.get_or_create(name="history")[0]
    existing = set(Project.objects.filter(workspace=workspace).values_list("name", flat=True))
    Project.objects.bulk_create(
        Project(workspace=workspace, name=f"p{n}")
        for n in range(project_count)
        if f"p{n}" not in existing
    )
    projects = list(Project.objects.filter(workspace=workspace))
    bench_projects = list(Project.objects.filter(workspace=_bench()))
    everyone = projects + bench_projects
    start = timezone.now() - timedelta(days=90)
    batch = 5000
    rng = random.Random(7)
    made = 0
    while made < rows:
        chunk = []
        for i in range(min(batch, rows - made)):
            at = start + timedelta(seconds=(made + i) * 5)
            ended = at + timedelta(minutes=3)
            # 80% claimed, 10% cancelled, 10% expired (the server's expiry is on: a week).
            fate = rng.random()
            state = (
                Message.State.CLAIMED
                if fate < 0.8
                else Message.State.CANCELLED
                if fate < 0.9
                else Message.State.EXPIRED
            )
            chunk.append(
                Message(
                    id=uuid7(),
                    to_project=rng.choice(everyone),
                    from_project=rng.choice(everyone),
                    body=BODY,
                    state=state,
                    created_at=at,
                    expires_at=at + timedelta(days=7),
                    claimed_at=ended if state == Message.State.CLAIMED else None,
                    cancelled_at=ended if state == Message.State.CANCELLED else None,
                )
            )
        with transaction.atomic():
            Message.objects.bulk_create(chunk, batch_size=1000)
        made += len(chunk)


def web(project_count: int, pending: int) -> None:
    """``project_count`` projects in workspace ``web`` holding ``pending`` messages."""
    workspace = Workspace.objects.get_or_create(name="web")[0]
    existing = set(Project.objects.filter(workspace=workspace).values_list("name", flat=True))
    Project.objects.bulk_create(
        Project(workspace=workspace, name=f"w{n}")
        for n in range(project_count)
        if f"w{n}" not in existing
    )
    projects = list(Project.objects.filter(workspace=workspace).order_by("name"))
    rng = random.Random(11)
    chunk = [
        Message(to_project=rng.choice(projects), from_project=rng.choice(projects), body=BODY)
        for _ in range(pending)
    ]
    Message.objects.bulk_create(chunk, batch_size=1000)


def hot_claims() -> None:
    """How many bench/hot messages are claimed, and over how long."""
    hot = Project.objects.get(workspace__name="bench", name="hot")
    claimed = Message.objects.filter(to_project=hot, state=Message.State.CLAIMED)
    span = claimed.aggregate(first=Min("claimed_at"), last=Max("claimed_at"))
    seconds = (span["last"] - span["first"]).total_seconds() if span["first"] else 0.0
    print(
        json.dumps(
            {
                "claimed": claimed.count(),
                "distinct": claimed.values("id").distinct().count(),
                "pending": Message.objects.pending().inbox_of(hot).count(),
                "seconds": seconds,
            }
        )
    )


def web_queries() -> None:
    """Queries of the home page and of one project page (anonymous server)."""
    client = Client(HTTP_HOST="127.0.0.1")
    counts = {}
    for name, path in (("home", "/web/"), ("project", "/web/w/web/w1/")):
        with CaptureQueriesContext(connection) as captured:
            assert client.get(path).status_code == 200
        counts[name] = len(captured.captured_queries)
    print(json.dumps(counts))


def purge(older_than_days: int) -> None:
    """The retention purge, at once, as ``manage purge_messages`` runs it; what it deleted."""
    started = time.monotonic()
    purged = messages_purge(older_than_days=older_than_days)
    print(json.dumps({**dataclasses.asdict(purged), "seconds": time.monotonic() - started}))


def size() -> None:
    """The database's size in bytes."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            print(json.dumps({"bytes": cursor.fetchone()[0]}))
        return
    name = str(connection.settings_dict["NAME"])
    files = [Path(name), Path(f"{name}-wal")]
    total = sum(path.stat().st_size for path in files if path.exists())
    print(json.dumps({"bytes": total}))


def settle() -> None:
    """After a bulk load, the state a server that has run for a while is in: on PostgreSQL
    the table analysed and vacuumed (what autovacuum does within minutes of such a load)
    and the load's WAL checkpointed; on SQLite the WAL copied back into the database.
    Measuring right after the load measures the load's clean-up instead."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"VACUUM ANALYZE {Message._meta.db_table}")
            cursor.execute("CHECKPOINT")
        else:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    print("{}")


COMMANDS = {
    "projects": projects,
    "parking": parking,
    "stock": stock,
    "refill": refill,
    "history": history,
    "web": web,
    "hot-claims": hot_claims,
    "web-queries": web_queries,
    "purge": purge,
    "size": size,
    "settle": settle,
}

if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    COMMANDS[command](*(int(a) for a in arguments))  # type: ignore[operator]
