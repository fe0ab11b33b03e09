"""``docs/benchmarks.md`` from the figures ``bench.run`` measured (also kept as JSON)."""

from __future__ import annotations

import platform
import re
import sqlite3
from importlib.metadata import version
from pathlib import Path
from typing import Any

CONCURRENCIES = (1, 8, 32)


def _load_row(label: str, load: dict[str, Any], floor: dict[str, Any] | None) -> str:
    ratio = f"{load['rps'] / floor['rps']:.2f}" if floor else "—"
    return (
        f"| {label} | {load['connections']} | {load['rps']:,.0f} | {_sent(load, 'p50'):.1f} | "
        f"{_sent(load, 'p95'):.1f} | {_sent(load, 'p99'):.1f} | {_sent(load, 'max'):,.0f} | "
        f"{load['p99_ms']:.1f} | {ratio} | {load['errors']} | {load['wrk_cpu']:.2f} |"
    )


def _sent(load: dict[str, Any], which: str) -> float:
    """A latency of ``load`` in ms as its requests were sent (``p50``, ``p95``, ``p99``,
    ``max``), timed in ``bench/wrk/common.lua``; wrk's own where the run was not timed."""
    timed = load.get(f"sent_{which}_ms", 0.0)
    if timed or which == "max":  # wrk reports no maximum of its own here
        return float(timed)
    return float(load[f"{which}_ms"])


def _stall(load: dict[str, Any]) -> str:
    """What the machine took during ``load``: stolen cores, then the I/O stall share."""
    return f"{load.get('steal_cores', 0.0):.2f} stolen, I/O {load.get('io_stall', 0.0):.0%}"


#: The verdict of a target set aside: 0.5 of the floor is bound by Django's cost per
#: request, not by anything of ours (docs/hot-path.md#what-bounds-the-rates).
WITHDRAWN = "withdrawn"


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _database_section(name: str, r: dict[str, Any], peer: dict[str, Any]) -> tuple[str, list[str]]:
    rows = []
    for c in CONCURRENCIES:
        floor = r[f"floor_c{c}"]
        rows.append(_load_row("floor `GET /healthz`", floor, floor))
        rows.append(_load_row("static file (whitenoise)", r[f"static_c{c}"], floor))
        rows.append(_load_row("REST send (1 KB)", r[f"send_c{c}"], floor))
        rows.append(_load_row("REST pop (stocked)", r[f"pop_c{c}"], floor))
        rows.append(_load_row("MCP send", r[f"mcp_send_c{c}"], floor))
        rows.append(_load_row("MCP pop", r[f"mcp_pop_c{c}"], floor))
    mcp_rows = [
        f"| {c} | {r[f'mcp_send_c{c}']['rps'] / r[f'send_c{c}']['rps']:.2f} | "
        f"{r[f'mcp_pop_c{c}']['rps'] / r[f'pop_c{c}']['rps']:.2f} |"
        for c in CONCURRENCIES
    ]
    contention, db = r["contention"], r["contention_db"]
    claims_per_s = db["claimed"] / db["seconds"] if db["seconds"] else 0.0
    exactly_once = db["claimed"] == contention["claimed"] == db["distinct"]
    scale = [
        ("send", r["empty_send_c1"], r["scale_send_c1"]),
        ("pop", r["empty_pop_c1"], r["scale_pop_c1"]),
        ("list 50", r["empty_list_c1"], r["scale_list_c1"]),
    ]
    scale_rows = [
        f"| {label} | {_sent(empty, 'p95'):.2f} | {_sent(full, 'p95'):.2f} | "
        f"{_sent(full, 'p95') / _sent(empty, 'p95'):.2f} | {_sent(full, 'max'):,.0f} | "
        f"{full['p95_ms'] / empty['p95_ms']:.2f} | {_stall(empty)} | {_stall(full)} |"
        for label, empty, full in scale
    ]
    loads = [load for load in r.values() if isinstance(load, dict) and "steal_cores" in load]
    steal = max((load["steal_cores"] for load in loads), default=0.0)
    io_stall = max((load["io_stall"] for load in loads), default=0.0)
    memory = r["memory"]
    rss = {
        moment: sum(v for k, v in memory[moment].items() if k.endswith("VmRSS"))
        for moment in ("start", "half", "end")
    }
    peak = sum(v for k, v in memory["end"].items() if k.endswith("VmHWM"))
    growth = (rss["end"] - rss["half"]) / rss["half"]
    peer_rows = []
    ahead = True
    if "send_c1" in peer:
        for c in CONCURRENCIES:
            ours_send, ours_pop = r[f"send_c{c}"]["rps"], r[f"pop_c{c}"]["rps"]
            their_send, their_read = peer[f"send_c{c}"]["rps"], peer[f"read_c{c}"]["rps"]
            ahead = ahead and ours_send > their_send and ours_pop > their_read
            peer_rows.append(
                f"| {c} | {ours_send:,.0f} | {their_send:,.0f} | {ours_send / their_send:.2f} | "
                f"{ours_pop:,.0f} | {their_read:,.0f} | {ours_pop / their_read:.2f} |"
            )
    f8 = r["floor_c8"]["rps"]
    targets = [
        (
            "send at 8 clients ≥ 0.5 of the floor",
            f"{r['send_c8']['rps'] / f8:.2f}",
            WITHDRAWN,
        ),
        (
            "pop at 8 clients ≥ 0.5 of the floor",
            f"{r['pop_c8']['rps'] / f8:.2f}",
            WITHDRAWN,
        ),
        (
            "send p99 at 8 clients < 25 ms",
            f"{_sent(r['send_c8'], 'p99'):.1f} ms (wrk's {r['send_c8']['p99_ms']:.1f} ms)",
            _sent(r["send_c8"], "p99") < 25,
        ),
        (
            "pop p99 at 8 clients < 25 ms",
            f"{_sent(r['pop_c8'], 'p99'):.1f} ms (wrk's {r['pop_c8']['p99_ms']:.1f} ms)",
            _sent(r["pop_c8"], "p99") < 25,
        ),
        (
            "MCP ≥ 0.8 of REST (send and pop, every concurrency)",
            min(
                min(
                    r[f"mcp_send_c{c}"]["rps"] / r[f"send_c{c}"]["rps"],
                    r[f"mcp_pop_c{c}"]["rps"] / r[f"pop_c{c}"]["rps"],
                )
                for c in CONCURRENCIES
            ),
            None,
        ),
        (
            "contention exactly once",
            f"{db['claimed']} claimed, {db['distinct']} distinct",
            exactly_once,
        ),
        (
            "contention ≥ 0.5 of the uncontended pop rate (c=32)",
            f"{claims_per_s / r['pop_c32']['rps']:.2f}",
            claims_per_s / r["pop_c32"]["rps"] >= 0.5,
        ),
        (
            "p95 at a million rows within 1.3× of before them (send, pop, list)",
            ", ".join(f"{_sent(full, 'p95') / _sent(empty, 'p95'):.2f}" for _, empty, full in scale)
            + " (wrk's "
            + ", ".join(f"{full['p95_ms'] / empty['p95_ms']:.2f}" for _, empty, full in scale)
            + ")",
            all(_sent(full, "p95") / _sent(empty, "p95") <= 1.3 for _, empty, full in scale),
        ),
        (
            "web query count independent of project count",
            f"{r['web_queries_small']} → {r['web_queries']}",
            r["web_queries_small"] == r["web_queries"],
        ),
        (
            "home under 100 ms median at 1,000 projects",
            f"{_sent(r['web_home'], 'p50'):.1f} ms",
            _sent(r["web_home"], "p50") < 100,
        ),
        ("memory growth over the second half < 10%", f"{growth:.1%}", growth < 0.10),
    ]
    if peer_rows:
        targets.append(
            ("ahead of the peer on send and on pop vs read+ack, every concurrency", "", ahead)
        )
    target_rows = []
    for label, value, ok in targets:
        if ok is None:
            ok = float(value) >= 0.8
            value = f"{float(value):.2f}"
        verdict = ok if isinstance(ok, str) else _met(bool(ok))
        target_rows.append(f"| {label} | {value} | {verdict} |")
    purge = r.get("purge")
    if purge:
        worst = max(
            purge[f"{load}_during_p99_ms"] / purge[f"{load}_quiet_p99_ms"]
            for load in ("send", "pop")
        )
        target_rows.append(
            f"| purging a million finished rows: send and pop p99 at 8 clients ≤ 2× without "
            f"| {worst:.2f}× | {_met(worst <= 2)} |"
        )
    measured_at = ", ".join(f"{part} {at}" for part, at in r.get("measured", {}).items())
    section = f"""## {name}

{f"Parts measured (UTC): {measured_at}." if measured_at else ""}

### Throughput and latency (wrk, {r["send_c1"]["seconds"]:.0f} s per row)

Each row's seconds are {r["rounds"]} short runs that took turns with the other rows of its
concurrency (and, on SQLite, with the peer's), so the machine's drift falls on all of
them alike: req/s over all of a row's runs; latency percentiles, the median of its runs'.
Latencies (ms) are of the requests as they were sent, timed in the wrk scripts
(`bench/wrk/common.lua`). `wrk p99` is wrk's own figure, which wrk 4 corrects for
coordinated omission: for each response slower than the run's mean interval it adds the
requests a client sending at that mean rate would have had waiting, so a single stall
weighs as many requests as would have queued behind it (one stall of 1.5 s among 15,000
requests at one client gives a wrk p95 of 1.2 s and a p95 as sent of 0.23 ms). The
targets are read on the requests as sent; wrk's figure stays beside them.
Ratio: requests/s over the floor's at the same concurrency in this run. `wrk cores`: the
load generator's own CPU use (1.0 = one core), far below what the server uses. What the
machine itself took during any one load of this database, at most: {steal:.2f} cores stolen by
the hypervisor, and some task waiting on the disk {io_stall:.0%} of a row's time.

| route | clients | req/s | p50 | p95 | p99 | max | wrk p99 | vs floor | errors | wrk cores |
|---|---|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

### MCP `tools/call` vs REST (req/s ratio)

| clients | send | pop |
|---|---|---|
{chr(10).join(mcp_rows)}

### Contention: 32 clients popping one inbox

The inbox was kept at 250 pending until {db["claimed"] + db["pending"]:,} messages went in.
{db["claimed"]:,} claimed in {db["seconds"]:.1f} s: **{claims_per_s:,.0f} claims/s**
({claims_per_s / r["pop_c32"]["rps"]:.2f} of the uncontended pop rate at 32 clients).
Pops that answered a message: {contention["claimed"]:,}; distinct claimed rows in the
database: {db["distinct"]:,}; exactly once: **{"yes" if exactly_once else "NO"}**.

### Scale: 1,000,000 historical messages over 1,000 projects

p95 at one client just before the history was written (the database then holds what this
run sent, {r["size_before"]["bytes"] / 2**20:,.0f} MiB) and after it (database
{r["size"]["bytes"] / 2**20:,.0f} MiB; the table vacuumed, analysed and checkpointed first,
as autovacuum and the checkpointer leave it minutes after such a load):

Machine: cores stolen by the hypervisor during the row, and the share of its time in
which some task waited on the disk (`/proc/stat`, `/proc/pressure/io`), the noise a
ratio here is read against.

| operation | before p95 ms | 1M rows p95 ms | ratio | slowest at 1M, ms | wrk's p95 ratio | machine before | machine at 1M |
|---|---|---|---|---|---|---|---|
{chr(10).join(scale_rows)}

{_purge_text(r.get("purge"))}

### Web pages: 1,000 projects, 10,000 pending messages

| page | median ms | p95 ms | queries (2 projects → 1,000) |
|---|---|---|---|
| home `/web/` | {_sent(r["web_home"], "p50"):.1f} | {_sent(r["web_home"], "p95"):.1f} | {r["web_queries_small"]["home"]} → {r["web_queries"]["home"]} |
| project page | {_sent(r["web_project"], "p50"):.1f} | {_sent(r["web_project"], "p95"):.1f} | {r["web_queries_small"]["project"]} → {r["web_queries"]["project"]} |

### Memory

Resident memory of all server processes: {rss["start"] / 1024:.1f} MiB at the start,
{rss["half"] / 1024:.1f} MiB after half of the send/pop mix, {rss["end"] / 1024:.1f} MiB at
the end (peak {peak / 1024:.1f} MiB); growth over the second half: {growth:.1%}.

### The peer (PyPI `agent-inbox` {peer.get("version", "")}), same machine, same loads

Its runs took turns with ours on SQLite; the PostgreSQL rows compare with those same
figures (the peer runs on its own SQLite).

{_peer_table(peer_rows, peer)}

### Targets

| target | measured | |
|---|---|---|
{chr(10).join(target_rows)}
"""
    return section, [row for row in target_rows if "not met" in row]


def _purge_text(purge: dict[str, Any] | None) -> str:
    """The retention purge of the history while 8 clients send and pop."""
    if not purge:
        return "The retention purge was not measured in this run."
    counts = purge["counts"]
    return f"""Then the history's {counts["messages"]:,} finished messages (and {counts["pop_requests"]:,}
pop request ids) were purged as `AI_MEMORY_RETENTION_DAYS` purges them, in batches of short
write transactions, while 8 clients sent and popped ({purge["rounds_during"]} rounds of each
during the purge, 3 before it): **{purge["rows_per_s"]:,.0f} rows/s** ({purge["seconds"]:.0f} s).

| load (8 clients) | p99 ms without | p99 ms during the purge | ratio | req/s without | req/s during |
|---|---|---|---|---|---|
""" + "\n".join(
        f"| {load} | {purge[f'{load}_quiet_p99_ms']:.1f} | {purge[f'{load}_during_p99_ms']:.1f} | "
        f"{purge[f'{load}_during_p99_ms'] / purge[f'{load}_quiet_p99_ms']:.2f} | "
        f"{purge[f'{load}_quiet_rps']:,.0f} | {purge[f'{load}_during_rps']:,.0f} |"
        for load in ("send", "pop")
    )


def _peer_table(rows: list[str], peer: dict[str, Any]) -> str:
    if not rows:
        return f"Not run: {peer.get('skipped', 'unknown')}."
    return (
        "| clients | our send req/s | peer send req/s | ratio | our pop req/s | "
        "peer read+ack req/s | ratio |\n|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def _mib(kib: float | None) -> str:
    return "not measured" if kib is None else f"{kib / 1024:,.0f} MiB"


def _failure_cause(failure: str) -> str:
    """The part of a failed run's last error line that names its cause.

    A database's own refusal ("FATAL:  sorry, too many clients already") says more than
    the driver's wrapping of it, which repeats the address.
    """
    _, fatal, cause = failure.partition("FATAL:")
    return f"the database refused a connection: {' '.join(cause.split())}" if fatal else failure


def _waiting_figures(r: dict[str, Any]) -> dict[str, Any]:
    """One database's waiting figures; those of a run before the gevent worker, which
    measured each of two worker designs, as those of its default design (``slots``)."""
    if "designs" not in r:
        return r
    chosen = r["designs"].get("slots", {})
    failed = {name: chosen["failed"] for name in ("parked", "slow") if "failed" in chosen}
    return {**r, **{k: v for k, v in chosen.items() if k != "failed"}, "failed": failed}


def _count(n: float) -> str:
    return f"{n:,.0f}"


def _statuses(statuses: dict[str, int]) -> str:
    return ", ".join(f"{n:,} × {status}" for status, n in sorted(statuses.items())) or "none"


def _parked_rows(p: dict[str, Any] | None, slow: dict[str, Any] | None) -> list[str]:
    rows = []
    if p is not None:
        beside = f"{_count(p['parked'])} parked pops"
        for load in ("send", "pop"):
            idle, busy = p[f"{load}_idle"], p[f"{load}_parked"]
            rows.append(
                f"| {load} | {beside} | {idle['rps']:,.0f} | {busy['rps']:,.0f} | "
                f"{p[f'{load}_ratio']:.2f} | {idle['p99_ms']:.1f} | {busy['p99_ms']:.1f} | "
                f"{busy['p99_ms'] / idle['p99_ms'] if idle['p99_ms'] else 0:.2f} | "
                f"{busy['errors']} |"
            )
    if slow is not None:
        beside = f"{_count(slow.get('clients', 20))} slow clients"
        for load, label in (("floor", "floor `GET /healthz`"), ("send", "send")):
            idle, busy = slow[f"{load}_idle"], slow[f"{load}_slow"]
            rows.append(
                f"| {label} | {beside} | {idle['rps']:,.0f} | {busy['rps']:,.0f} | "
                f"{busy['rps'] / idle['rps'] if idle['rps'] else 0:.2f} | "
                f"{idle['p99_ms']:.1f} | {busy['p99_ms']:.1f} | "
                f"{slow[f'{load}_p99_ratio']:.2f} | {busy['errors']} |"
            )
    return rows


def _waiting_notes(r: dict[str, Any]) -> list[str]:
    """What the tables do not show, a sentence or two per figure."""
    notes = []
    p = r.get("parked")
    if p is not None:
        peak = p.get("peak_process_kib")
        notes.append(
            f"Memory: the {p['processes']} server processes held "
            f"{p['rss_before_kib'] / 1024:,.0f} MiB before the first park and "
            f"{p['rss_parked_kib'] / 1024:,.0f} MiB with {_count(p['parked'])} parked: "
            f"**{p['kib_per_parked']:,.1f} KiB per parked call**"
            + (f"; the largest process peaked at {peak / 1024:,.0f} MiB." if peak else ".")
        )
        parkers = p.get("parkers")
        if parkers is not None:
            seconds = p.get("parking_seconds")
            notes.append(
                f"The parked pops: {_count(parkers['sent'])} requests"
                + (f" (all parked within {seconds:.0f} s of the first)" if seconds else "")
                + f", answered {_statuses(parkers['statuses'])}; "
                f"{_count(parkers['refused'])} refused, {_count(parkers['errors'])} failed"
                + (f" ({_statuses(parkers['error_kinds'])})" if parkers.get("error_kinds") else "")
                + f"; their process used {p.get('crowd_cores', 0.0):.2f} cores during the loads."
            )
    slow = r.get("slow")
    if slow is not None and "connects" in slow:
        notes.append(
            f"The slow clients connected {_count(slow['connects'])} times in all; the server "
            f"ended {_count(slow['closed'])} of those connections (answers: "
            f"{_statuses(slow['statuses'])}), and {_count(slow['errors'])} connects failed; "
            f"their process used {slow.get('crowd_cores', 0.0):.2f} cores during the loads."
        )
    h = r.get("herd")
    if h is not None:
        when = f" (measured {h['measured_at']} UTC)" if "measured_at" in h else ""
        notes.append(
            f"The herd{when}: **{h['parked_ms']:.2f} ms** of the server's CPU per send to an inbox "
            f"with {_count(h['parked'])} pops parked on it, **{h['none_ms']:.2f} ms** to one "
            f"with none ({h['ratio']:.2f}×) and **{h['one_ms']:.2f} ms** to one with a "
            f"single pop parked, the same cycle without the herd ({h['ratio_to_one']:.2f}×); "
            f"the pops claimed {_count(h['claimed'])} messages and were answered "
            f"{_statuses(h['statuses'])}, {_count(h['errors'])} failed."
        )
    s = r.get("shutdown")
    if s is not None:
        last, exited = s.get("last_answer_s"), s.get("exited_s")
        notes.append(
            f"Shutdown: of {_count(s['parked'])} parked pops, {_count(s['answers'])} were "
            f"answered ({_statuses(s['statuses'])}), the last "
            + (f"{last:.2f} s" if last is not None else "never")
            + f" after SIGTERM; {_count(s['errors'])} failed; the server exited after "
            + (f"{exited:.1f} s." if exited is not None else "more than 60 s.")
        )
    for name, cause in r.get("failed", {}).items():
        notes.append(f"Not measured, `{name}`: {_failure_cause(cause).rstrip('.')}.")
    return notes


def _waiting_targets(r: dict[str, Any]) -> list[str]:
    def failed(figure: str) -> str:
        return f"failed: {_failure_cause(r.get('failed', {}).get(figure, 'not measured'))}"

    rows: list[tuple[str, str, bool]] = []
    p = r.get("parked")
    parked = _count(p["parked"]) if p else "the"
    if p is not None:
        rows.append(
            (
                f"{parked} parked: send and pop at 8 clients ≥ 0.9 of their rate",
                f"{p['send_ratio']:.2f}, {p['pop_ratio']:.2f}",
                min(p["send_ratio"], p["pop_ratio"]) >= 0.9,
            )
        )
        parkers = p.get("parkers")
        if parkers is not None:
            rows.append(
                (
                    f"{parked} parked: none refused, none failed",
                    f"{_count(parkers['refused'])} refused, {_count(parkers['errors'])} failed",
                    parkers["refused"] == parkers["errors"] == 0,
                )
            )
    else:
        rows.append(
            ("parked pops: send and pop at 8 clients ≥ 0.9 of their rate", failed("parked"), False)
        )
    for key, where in (
        ("wake_one_server", "one server"),
        ("wake_two_servers", "send through another server"),
    ):
        w = r.get(key)
        rows.append(
            (
                f"wake p50 and p99 < 100 ms, {where}",
                f"{w['p50_ms']:.1f}, {w['p99_ms']:.1f} ms ({w['missed']} missed)"
                if w
                else failed(key),
                w is not None and w["p99_ms"] < 100 and not w["missed"],
            )
        )
    slow = r.get("slow")
    rows.append(
        (
            f"{_count(slow.get('clients', 20)) if slow else 'the'} slow clients: /healthz and "
            "send p99 ≤ 2× without them",
            f"{slow['floor_p99_ratio']:.2f}, {slow['send_p99_ratio']:.2f}"
            if slow
            else failed("slow"),
            slow is not None and max(slow["floor_p99_ratio"], slow["send_p99_ratio"]) <= 2,
        )
    )
    b = r.get("burst")
    rows.append(
        (
            f"{b['messages'] if b else 1000:,} messages to 16 parked pops: each claimed "
            "exactly once",
            f"{b['claimed']} claimed, {b['distinct']} distinct, {b['pending_after']} left"
            if b
            else failed("burst"),
            b is not None
            and b["claimed"] == b["distinct"] == b["messages"]
            and b["pending_after"] == 0,
        )
    )
    if "designs" not in r:  # figures of the gevent worker's bench
        h = r.get("herd")
        rows.append(
            (
                f"the herd: CPU per send to an inbox with {_count(h['parked']) if h else '1,000'} "
                "pops parked on it ≤ 1.5× with none",
                f"{h['ratio']:.2f}× ({h['parked_ms']:.2f} / {h['none_ms']:.2f} ms)"
                if h
                else failed("herd"),
                h is not None and 0 < h["ratio"] <= 1.5,
            )
        )
        rows.append(
            (
                "the herd alone: the same against a single pop parked ≤ 1.5× "
                "(with none, the message is never claimed: docs/serving.md#one-wake-per-message)",
                f"{h['ratio_to_one']:.2f}× ({h['parked_ms']:.2f} / {h['one_ms']:.2f} ms)"
                if h
                else failed("herd"),
                h is not None and 0 < h["ratio_to_one"] <= 1.5,
            )
        )
        s = r.get("shutdown")
        last = s.get("last_answer_s") if s else None
        rows.append(
            (
                f"shutdown: {_count(s['parked']) if s else 'the'} parked pops all answered "
                "≤ 2 s after SIGTERM",
                (
                    f"{last:.2f} s, {_count(s['unanswered'])} unanswered"
                    if last is not None
                    else f"none answered, {_count(s['errors'])} failed"
                )
                if s
                else failed("shutdown"),
                s is not None and last is not None and last <= 2 and s["unanswered"] == 0,
            )
        )
    return [
        f"| {label} | {value} | {'failed' if value.startswith('failed:') else _met(ok)} |"
        for label, value, ok in rows
    ]


def _waiting_section(waiting: dict[str, Any]) -> str:
    """The waiting-and-waking part (``bench.waiting``), measured at its own time."""
    parts = [
        f"""## Waiting and waking

Measured by `python -m bench.waiting` (also part of `make bench`) at {waiting["measured_at"]}
UTC. The server is `ai-memory serve` as a user starts it: gunicorn's gevent worker, in
which a parked call waits outside its request, holding its connection, the request as
it came and a greenlet at the top of its stack, and no database connection.
The parked pops and the slow clients come from a process of their own (`bench/crowd.py`:
raw asyncio connections, its open-files limit raised), all from 127.0.0.1, which is one
caller to an anonymous server: the server they park on runs with
`AI_MEMORY_MAX_WAITS_PER_CALLER` raised to their number, the other keeps the default
(200). The host's cap (`AI_MEMORY_MAX_WAITS`) is its default, 10,000, on both, unless
more are parked.

"Parked": two servers of one build, each on a database of its own, one with the pops
parked throughout (their first waits end over the first minute, so that one parks again
every 60 / their number seconds, as waits that began at any time do), the other with
none; their loads take turns, in alternating order, and a rate's ratio is the median of
each round's own ratio, so the machine's drift falls on both alike. Loads start once the
pops have all parked, and each measured load follows one second of the same load not
measured. "Slow clients": one server, with and without them, in alternating rounds; each
sends a request one byte every 2 s (a third of them their head, the others their body,
half of those under `Content-Length: 00000000050`) and connects again when the server
closes it. Latencies are as sent. Memory per parked call is the server's resident memory
with them parked less that before the first park, divided by their number. "The herd":
the CPU of the server's processes per send to one inbox with pops parked on it (a send
wakes one pop of the host, which claims the message, answers and is parked again by its
client), against sends to an inbox with none and to one with a single pop parked (the
same cycle without the herd), in rounds of sequential sends that take turns. "Shutdown": SIGTERM to the server (gunicorn's master) with pops parked; the time
to their last answer.
"""
    ]
    for key in ("sqlite", "postgresql"):
        if key not in waiting:
            continue
        r = _waiting_figures(waiting[key])
        p, slow = r.get("parked"), r.get("slow")
        table = ""
        if rows := _parked_rows(p, slow):
            table = (
                "| load (8 clients) | beside it | req/s without | req/s with | ratio | "
                "p99 ms without | p99 ms with | p99 × | errors with |\n"
                "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
            )
        notes = "\n\n".join(_waiting_notes(r))
        parts.append(
            f"""### {r["database"]} (measured {r.get("measured_at", waiting["measured_at"])} UTC)

{table}
{notes}

| target | measured | |
|---|---|---|
{chr(10).join(_waiting_targets(r))}
"""
        )
    return "\n".join(parts)


def report(results: dict[str, Any]) -> str:
    sections = []
    for key in ("sqlite", "postgresql"):
        if key in results:
            text, _ = _database_section(results[key]["database"], results[key], results["peer"])
            sections.append(text)
    if "waiting" in results:
        sections.append(_waiting_section(results["waiting"]))
    tools = results["tools_list"]
    started = results.get("started", "(not recorded)")
    return f"""# Benchmarks

Written by `make bench` (`python -m bench.run`), started {started} UTC.
Machine: {platform.machine()}, 2 cores shared by server and load generator, Python
{platform.python_version()}, Django {version("Django")}, gunicorn {version("gunicorn")},
SQLite {sqlite3.sqlite_version}. The server runs exactly as `ai-memory serve` starts it
(SQLite: a process of 1 thread per core; PostgreSQL: 2 x cores + 1 of 4 threads), on a
fresh data dir (and a fresh PostgreSQL database, default settings); load from `wrk` over
loopback with the scripts in `bench/wrk/`, one wrk thread per connection. The machine is
noisy: read the ratios, which compare figures of the same run. Raw figures:
`docs/benchmarks.json`.

{chr(10).join(sections)}
## MCP tool definitions

The `tools/list` answer every agent loads at every session start (tokens ≈ chars / 4):
{tools["chars"]:,} characters (≈ {tools["approx_tokens"]:,} tokens) in the initialize era,
{tools["modern_chars"]:,} (≈ {tools["modern_approx_tokens"]:,}) in the 2026-07-28 era.
"""


def report_write(output: Path, results: dict[str, Any]) -> None:
    """Write ``report(results)`` to ``output``, keeping the sections other bench modules
    keep there between their markers (``section_write``)."""
    kept = output.read_text() if output.exists() else ""
    sections = re.findall(r"<!-- ([\w ]+): begin -->.*?<!-- \1: end -->", kept, re.S)
    blocks = [
        kept[kept.index(f"<!-- {name}: begin -->") : kept.index(f"<!-- {name}: end -->")]
        + f"<!-- {name}: end -->"
        for name in sections
    ]
    output.write_text("\n\n".join([report(results).rstrip(), *blocks]) + "\n")


def section_write(output: Path, begin: str, end: str, section: str) -> None:
    """Put ``section`` (which starts with ``begin`` and ends with ``end``, its markers) in
    ``output`` in place of what was between those markers, or at the end: each bench module
    other than ``bench.run`` keeps its own part of docs/benchmarks.md, which ``bench.run``'s
    report leaves alone."""
    text = output.read_text() if output.exists() else ""
    if begin in text and end in text:
        text = text[: text.index(begin)] + section + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    output.write_text(text)
