"""``python -m bench.search`` (part of ``make bench``): what search and its index cost
(docs/reference.md#search-and-threads), on SQLite and, when it answers, on PostgreSQL.
It writes its section of ``docs/benchmarks.md`` (between the markers below) and
``docs/benchmarks-search.json``.

Per database, in a process of its own (``python -m bench.search worker``) on a fresh
database:

- **Send cost.** ``message_send`` in-process, 2,000 sends in blocks of 250, the blocks
  alternating between the schema without the search index (migrated to 0011) and with
  it (0012), after one unmeasured: p50 of each and their ratio.
- **Migration.** ``BENCH_SEARCH_ROWS`` (1,000,000) stored messages written in bulk
  without the index, ``BENCH_SEARCH_OWN`` (10,000) of them in the searching project's
  inbox, the rest among 1,000 others; then the time of ``migrate messaging 0012``, which
  builds the index of every one of them.
- **Search.** ``message_search`` in-process (the access query included), 200 times per
  kind after 20 to warm up: a common word (in 70% of the messages), a rare word (in
  0.05%), two words (each in 15%), and the common word over inbox and outbox; p50/p95.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.report import section_write

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "benchmarks.md"
OUTPUT_JSON = ROOT / "docs" / "benchmarks-search.json"
BEGIN, END = "<!-- search: begin -->", "<!-- search: end -->"
ROWS = int(os.environ.get("BENCH_SEARCH_ROWS", "1000000"))
OWN = int(os.environ.get("BENCH_SEARCH_OWN", "10000"))
OTHERS = 1000
SENDS, SEND_BLOCK = 2000, 250
RUNS, WARM = 200, 20
QUERIES = {
    "common word": ("deploying", "inbox"),
    "rare word": ("quokka", "inbox"),
    "two words": ("export invoice", "inbox"),
    "common word, inbox and outbox": ("deploying", "all"),
}
SEND_BODY = "Please add a /v1/export endpoint that streams NDJSON, and deploy it. " * 3


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _vocabulary(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pe", "dar", "gen", "tor"]
    words: set[str] = set()
    while len(words) < 5000:
        words.add("".join(rng.choices(syllables, k=rng.randint(2, 4))))
    return sorted(words)


def _text(rng: random.Random, vocabulary: list[str], weights: list[float]) -> tuple[str, str]:
    words = rng.choices(vocabulary, cum_weights=weights, k=30)
    if rng.random() < 0.7:
        words[rng.randrange(30)] = rng.choice(("deploy", "deploying", "deployed", "deploys"))
    if rng.random() < 0.15:
        words[rng.randrange(30)] = "export"
    if rng.random() < 0.15:
        words[rng.randrange(30)] = "invoice"
    if rng.random() < 0.0005:
        words[rng.randrange(30)] = "quokka"
    return " ".join(words[:4]), " ".join(words) + "."


# The worker: one database, configured by the environment it is started with.


def _worker() -> dict[str, Any]:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aimemory_site.settings")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("migrate", "messaging", "0011", verbosity=0)
    result: dict[str, Any] = {}
    result.update(_send_cost(call_command))
    call_command("migrate", "messaging", "0011", verbosity=0)
    result.update(_history())
    began = time.monotonic()
    call_command("migrate", "messaging", "0012", verbosity=0)
    result["migration_s"] = time.monotonic() - began
    _settle()
    result.update(_searches())
    return result


def _send_cost(call_command: Any) -> dict[str, float]:
    from aimemory_site.lib.principal import Principal
    from messaging.models import Message
    from messaging.services import message_send
    from projects.services import project_get_or_create

    anonymous = Principal.anonymous()
    for name in ("sender", *(f"to-{n}" for n in range(8))):
        project_get_or_create(principal=anonymous, workspace="send", project=name)
    times: dict[str, list[float]] = {"0011": [], "0012": []}
    # A first block unmeasured: the connection's and the statements' first use.
    for block in range(-1, SENDS // SEND_BLOCK):
        state = "0011" if block % 2 == 0 else "0012"
        call_command("migrate", "messaging", state, verbosity=0)
        Message.objects.update(state=Message.State.CLAIMED)  # no inbox fills up
        for n in range(SEND_BLOCK):
            began = time.perf_counter()
            message_send(
                principal=anonymous,
                to_workspace="send",
                to_project=f"to-{n % 8}",
                from_workspace="send",
                from_project="sender",
                subject="export endpoint",
                body=SEND_BODY,
            )
            if block >= 0:
                times[state].append(time.perf_counter() - began)
    without, with_index = statistics.median(times["0011"]), statistics.median(times["0012"])
    return {
        "send_p50_without_ms": without * 1000,
        "send_p50_with_ms": with_index * 1000,
        "send_ratio": without / with_index,
    }


def _history() -> dict[str, Any]:
    from django.db import connection, transaction

    from projects.models import Project, Workspace

    workspace = Workspace.objects.get_or_create(name="search")[0]
    Project.objects.bulk_create(
        [Project(workspace=workspace, name=f"p{n}") for n in range(OTHERS)]
        + [Project(workspace=workspace, name="me")],
        batch_size=1000,
    )
    others = list(Project.objects.filter(workspace=workspace).exclude(name="me"))
    me = Project.objects.get(workspace=workspace, name="me")
    rng = random.Random(45)
    vocabulary = _vocabulary(rng)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(vocabulary))))
    states = ["claimed"] * 7 + ["pending", "cancelled", "expired"]
    began = time.monotonic()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    columns = (
        "id, to_project_id, from_project_id, from_agent, from_owner_user, subject, body, "
        "omitted_chars, redactions, state, created_at, claimed_by_agent, claimed_by_user"
    )
    sqlite = connection.vendor == "sqlite"

    def key(value: uuid.UUID) -> Any:
        return value.hex if sqlite else value

    def rows() -> Iterator[tuple[Any, ...]]:
        own_every = ROWS // OWN
        for n in range(ROWS):
            recipient = me if n % own_every == 0 and n // own_every < OWN else rng.choice(others)
            subject, body = _text(rng, vocabulary, weights)
            at = start + timedelta(seconds=n * 5)
            yield (
                key(uuid.uuid4()),
                key(recipient.pk),
                key(rng.choice(others).pk),
                "other",
                "",
                subject,
                body,
                0,
                0,
                rng.choice(states),
                at.isoformat(sep=" ") if sqlite else at,
                "",
                "",
            )

    batch: list[tuple[Any, ...]] = []
    with transaction.atomic(), connection.cursor() as cursor:
        if sqlite:
            sql = f"INSERT INTO messaging_message ({columns}) VALUES ({', '.join(['%s'] * 13)})"
            for row in rows():
                batch.append(row)
                if len(batch) == 10_000:
                    cursor.executemany(sql, batch)
                    batch = []
            if batch:
                cursor.executemany(sql, batch)
        else:
            with cursor.cursor.copy(f"COPY messaging_message ({columns}) FROM STDIN") as copy:
                for row in rows():
                    copy.write_row(row)
    return {"rows": ROWS, "own": OWN, "load_s": time.monotonic() - began}


def _settle() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("VACUUM ANALYZE messaging_message")
            cursor.execute("CHECKPOINT")
        else:
            cursor.execute("ANALYZE")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _searches() -> dict[str, Any]:
    from aimemory_site.lib.principal import Principal
    from messaging.search import message_search

    anonymous = Principal.anonymous()
    figures: dict[str, Any] = {}
    for label, (query, box) in QUERIES.items():
        times, hits = [], 0
        for n in range(WARM + RUNS):
            began = time.perf_counter()
            found = message_search(
                anonymous, workspace="search", project="me", query=query, box=box
            )
            elapsed = time.perf_counter() - began
            if n >= WARM:
                times.append(elapsed)
            hits = len(found)
        figures[label] = {
            "p50_ms": statistics.median(times) * 1000,
            "p95_ms": _percentile(times, 0.95) * 1000,
            "hits": hits,
        }
    figures["matches"] = _match_counts()
    return {"search": figures}


def _match_counts() -> dict[str, int]:
    """How many of the project's messages each query matches (what ranking sorts)."""
    from django.db import connection

    from messaging.search import query_words

    counts = {}
    with connection.cursor() as cursor:
        for label, (query, _) in QUERIES.items():
            words = query_words(query)
            if connection.vendor == "postgresql":
                cursor.execute(
                    "SELECT COUNT(*) FROM messaging_message m JOIN projects_project p "
                    "ON p.id = m.to_project_id WHERE p.name = 'me' AND "
                    "m.search_vector @@ plainto_tsquery('english', %s)",
                    [" ".join(words)],
                )
            else:
                cursor.execute(
                    "SELECT COUNT(*) FROM message_fts f JOIN messaging_message m "
                    "ON m.rowid = f.rowid JOIN projects_project p ON p.id = m.to_project_id "
                    "WHERE message_fts MATCH %s AND p.name = 'me'",
                    [" AND ".join(f'"{word}"' for word in words)],
                )
            counts[label] = cursor.fetchone()[0]
    return counts


# The driver.


def _measure(database_url: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-search-") as work:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("AI_MEMORY_") and key != "DATABASE_URL"
        }
        env["AI_MEMORY_DATA_DIR"] = work
        if database_url:
            env["DATABASE_URL"] = database_url
        done = subprocess.run(
            [sys.executable, "-m", "bench.search", "worker"],
            env=env,
            cwd=ROOT,
            check=True,
            stdout=subprocess.PIPE,
        )
        result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
        return result


def _section(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        BEGIN,
        "## Search",
        "",
        f"`python -m bench.search` (in `make bench`): {ROWS:,} stored messages of every "
        f"state, {OWN:,} of them in the searching project's inbox and the rest among "
        f"{OTHERS:,} other projects, 30 words each; `message_search` in-process (its access "
        f"query included), {RUNS} times per query after {WARM}. The common word is in 70% of "
        "the messages (as `deploy`, `deploying`, `deployed`, `deploys`: one stem), the rare "
        "one in 0.05%, each of the two words in 15%.",
        "",
        "| database | query | matches in the project | p50 (ms) | p95 (ms) |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        for label in QUERIES:
            s = r["search"][label]
            lines.append(
                f"| {name} | {label} | {r['search']['matches'][label]:,} | "
                f"{s['p50_ms']:.1f} | {s['p95_ms']:.1f} |"
            )
    lines += [
        "",
        "| database | bulk load (s) | `migrate messaging 0012` on those rows (s) | "
        "send p50 without / with the index (ms) | ratio |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['load_s']:.0f} | {r['migration_s']:.1f} | "
            f"{r['send_p50_without_ms']:.2f} / {r['send_p50_with_ms']:.2f} | "
            f"{r['send_ratio']:.2f} |"
        )
    lines += [
        "",
        f"The send figures are `message_send` in-process, {SENDS:,} sends in blocks of "
        f"{SEND_BLOCK} alternating between the schema without the index and with it, on an "
        "empty database: the ratio (without / with) is what writing the index costs a send "
        "(the trigger's FTS5 insert on SQLite; the generated column and its GIN entries on "
        "PostgreSQL, which GIN's fast update appends to its pending list). The migration "
        "builds the index of every stored message at once: on SQLite in one pass into the "
        "FTS5 table, on PostgreSQL by rewriting the table with the generated column, then "
        "building the GIN index.",
        "",
        "A word in most of a million messages is the worst case on SQLite: FTS5's bm25 "
        "weighs each word by how many of all the messages hold it, which it counts by "
        "walking that word's whole list (about 22 ms for 700,000 messages here) before it "
        "ranks the project's matches (about 9 ms for 6,882); the project's key in the same "
        "match keeps the rest to the project's rows. Its p95 moves by a third between runs "
        "on this shared 2-core machine, the p50 little. PostgreSQL's GIN index over the "
        "project and the words skips to the project's entries, and reads and ranks only "
        "its matches.",
        END,
    ]
    return "\n".join(lines)


def main() -> None:
    from bench.harness import postgres_database

    results: dict[str, dict[str, Any]] = {"SQLite": _measure(None)}
    with postgres_database() as url:
        if url is not None:
            results["PostgreSQL"] = _measure(url)
    OUTPUT_JSON.write_text(json.dumps(results, indent=2) + "\n")
    section = _section(results)
    section_write(OUTPUT, BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    if sys.argv[1:] == ["worker"]:
        print(json.dumps(_worker()))
    else:
        main()
