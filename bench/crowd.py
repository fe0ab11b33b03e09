"""The crowds of ``bench.waiting``: pops that park (and park again), and clients that
trickle a request a byte at a time, by the thousand, from a process of their own.

Run as ``python -m bench.crowd BASE SPEC`` (SPEC: JSON, the fields of ``Spec``); the
bench drives it with ``bench.waiting.Crowd``. Each connection is a raw asyncio stream
that writes its HTTP/1.1 request itself and reads the answer's head and length: 10,000
httpx connections in the bench's own process cost it more CPU and memory than the
server they were measuring, and shared its open-files limit with wrk and the seeds.
Here the limit is raised to the hard one, and the clients' CPU is one event loop's.

It speaks in JSON lines on stdout: one when every client has sent its first request (or
byte), ``{"ready": true, ...}``; one for each ``stats`` line read on stdin; and a last one
at ``stop`` (or the end of stdin, so that it never outlives the bench), once every
connection is closed. Each line holds the counts of ``Counts``; times are
``time.monotonic()`` readings, which on Linux the bench's process shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: Connections being opened at once: 10,000 opened together overflowed the listen
#: queue, and a dropped SYN is retried only after a second.
CONNECTING = 200
#: The longest wait a pop may ask for (``lib.limits.WAIT_SECONDS_MAX``).
WAIT_SECONDS_MAX = 60
#: How often a trickling client sends its next byte.
TRICKLE_SECONDS = 2.0
#: The server's client timeout (``AI_MEMORY_CLIENT_TIMEOUT``'s default), within which
#: it ends a head that has not arrived.
HEAD_SECONDS = 10.0
#: Extra seconds an answer may take past the wait it asked for.
ANSWER_GRACE_SECONDS = 30.0


@dataclass
class Spec:
    """What to run against the server.

    ``parkers`` pops with ``wait_seconds``, on ``inbox`` (``{n}`` is the parker's number);
    with ``spread``, the first waits run from 1 to 60 s, so that afterwards one of them
    parks again every 60 / ``parkers`` seconds, as waits that began at any time do (all
    at once, they end at once); without it, every wait is 60 s. With ``again``, a parker
    parks again as soon as it is answered; without it, it parks once. ``tricklers``
    clients each send a request a byte every ``TRICKLE_SECONDS`` (``_trickles``)."""

    parkers: int = 0
    inbox: str = "park-{n}"
    spread: bool = True
    again: bool = True
    tricklers: int = 0

    @classmethod
    def of(cls, text: str) -> Spec:
        return cls(**json.loads(text))


@dataclass
class Counts:
    """What the clients saw; ``statuses`` counts answers by HTTP status."""

    parkers: int = 0
    sent: int = 0  # pop requests written
    answers: int = 0
    claimed: int = 0  # answers that held a message
    statuses: Counter[str] = field(default_factory=Counter)
    errors: int = 0  # a connection that failed, broke or closed before its answer came
    error_kinds: Counter[str] = field(default_factory=Counter)
    done: int = 0  # parkers (of those that park once) answered or failed
    first_answer_at: float = 0.0
    last_answer_at: float = 0.0
    tricklers: int = 0
    trickle_connects: int = 0
    trickle_closed: int = 0  # connections the server ended (each then reconnects)
    trickle_statuses: Counter[str] = field(default_factory=Counter)
    trickle_errors: int = 0
    trickle_bytes: int = 0

    def error(self, exc: BaseException, trickler: bool = False) -> None:
        if trickler:
            self.trickle_errors += 1
            self.error_kinds[f"trickler {type(exc).__name__}"] += 1
        else:
            self.errors += 1
            self.error_kinds[type(exc).__name__] += 1

    def as_json(self, **extra: Any) -> str:
        fields = {k: dict(v) if isinstance(v, Counter) else v for k, v in vars(self).items()}
        # The crowd's own CPU, so that a figure can show it was not what slowed the server.
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = {"cpu_s": usage.ru_utime + usage.ru_stime, "at": time.monotonic()}
        return json.dumps({**extra, **fields, **cpu})


@dataclass
class Answer:
    status: int
    close: bool
    body: bytes
    retry_after: float


async def answer_read(reader: asyncio.StreamReader) -> Answer:
    """One HTTP/1.1 answer: its head, then a body of its ``Content-Length``, chunked, or
    up to the end of the connection."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split(" ", 2)[1])
    headers = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    close = headers.get("connection", "").lower() == "close"
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        pieces = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            pieces.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")  # no trailers are sent
        body = b"".join(pieces)
    else:
        body, close = await reader.read(), True
    try:
        retry_after = float(headers.get("retry-after", "0"))
    except ValueError:
        retry_after = 0.0
    return Answer(status, close, body, retry_after)


def _claimed(body: bytes) -> bool:
    """Whether a pop's answer holds a message."""
    try:
        return json.loads(body).get("message") is not None
    except (ValueError, AttributeError):
        return False


def _trickles(host: str) -> list[tuple[bytes, bytes]]:
    """The slow clients' requests, as (sent at once, then trickled): one trickles its
    head, the others their body, one of them under a ``Content-Length`` spelt with
    leading zeros (which a careless parser reads as octal, or refuses)."""
    send = (
        f"POST /api/v1/messages HTTP/1.1\r\nHost: {host}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    ).encode()
    pop = json.dumps({"workspace": "bench", "project": "park-0"}).ljust(50).encode()
    zeros = (
        f"POST /api/v1/messages/pop HTTP/1.1\r\nHost: {host}\r\n"
        "Content-Type: application/json\r\nContent-Length: 00000000050\r\n\r\n"
    ).encode()
    assert len(pop) == 50
    return [(b"", send + b"x" * 100_000), (send, b"x" * 100_000), (zeros, pop)]


class Crowd:
    """The clients of one ``Spec`` against the server at ``base``, all in this process's
    event loop."""

    def __init__(self, base: str, spec: Spec) -> None:
        self.host, port = base.removeprefix("http://").rstrip("/").split(":")
        self.port = int(port)
        self.spec = spec
        self.counts = Counts(parkers=spec.parkers, tricklers=spec.tricklers)
        self.started = 0  # clients that have sent their first request or byte
        self.all_started = asyncio.Event()
        self.gate = asyncio.Semaphore(CONNECTING)
        self.trickles = _trickles(f"{self.host}:{self.port}")

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with self.gate:
            return await asyncio.open_connection(self.host, self.port)

    def first_sent(self) -> None:
        self.started += 1
        if self.started == self.spec.parkers + self.spec.tricklers:
            self.all_started.set()

    async def park(self, n: int) -> None:
        spec, counts = self.spec, self.counts
        wait = max(1, round(60 * (n + 1) / spec.parkers)) if spec.spread else WAIT_SECONDS_MAX
        inbox = spec.inbox.format(n=n)
        first = True
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                try:
                    if conn is None:
                        conn = await self.connect()
                    reader, writer = conn
                    body = json.dumps(
                        {"workspace": "bench", "project": inbox, "wait_seconds": wait}
                    ).encode()
                    writer.write(
                        (
                            f"POST /api/v1/messages/pop HTTP/1.1\r\n"
                            f"Host: {self.host}:{self.port}\r\n"
                            "Content-Type: application/json\r\n"
                            f"Content-Length: {len(body)}\r\n\r\n"
                        ).encode()
                        + body
                    )
                    counts.sent += 1
                    if first:
                        first = False
                        self.first_sent()
                    async with asyncio.timeout(wait + ANSWER_GRACE_SECONDS):
                        answer = await answer_read(reader)
                except (
                    OSError,
                    EOFError,
                    ValueError,
                    TimeoutError,
                    asyncio.LimitOverrunError,
                ) as exc:
                    # EOFError: asyncio.IncompleteReadError, the connection closed early.
                    counts.error(exc)
                    if conn is not None:
                        conn[1].close()
                        conn = None
                    if first:
                        first = False
                        self.first_sent()
                    if not spec.again:
                        break
                    await asyncio.sleep(1.0)
                    continue
                counts.answers += 1
                counts.statuses[str(answer.status)] += 1
                counts.last_answer_at = time.monotonic()
                counts.first_answer_at = counts.first_answer_at or counts.last_answer_at
                if answer.status == 200 and _claimed(answer.body):
                    counts.claimed += 1
                if answer.close:
                    conn[1].close()
                    conn = None
                if not spec.again:
                    break
                if answer.status != 200:  # refused (429 says when to try again)
                    await asyncio.sleep(max(answer.retry_after, 1.0))
                wait = WAIT_SECONDS_MAX
        finally:
            if conn is not None:
                conn[1].close()
            if not spec.again:
                counts.done += 1

    async def trickle(self, n: int) -> None:
        counts = self.counts
        at_once, trickled = self.trickles[n % len(self.trickles)]
        # A short body begins at a place of its own, so that such bodies end one after
        # another within a load (and are answered) rather than all after 100 s.
        start = (n // len(self.trickles)) % len(trickled) if at_once and len(trickled) < 100 else 0
        # The server ends a head that has not arrived within its client timeout: the
        # first connection of a head hangs up at a moment of its own within that time,
        # so that the server's cuts (and the reconnects) come one after another rather
        # than all together, as with clients that did not all connect at once.
        hang_up: float | None = None
        if not at_once:
            hang_up = time.monotonic() + HEAD_SECONDS * (n + 1) / self.spec.tricklers
        first = True
        while True:
            try:
                reader, writer = await self.connect()
            except OSError as exc:
                counts.error(exc, trickler=True)
                if first:
                    first = False
                    self.first_sent()
                await asyncio.sleep(1.0)
                continue
            counts.trickle_connects += 1
            answered = asyncio.create_task(self.trickle_answers(reader))
            try:
                writer.write(at_once + trickled[:start])
                sent = start
                while sent < len(trickled) and not answered.done():
                    if hang_up is not None and time.monotonic() >= hang_up:
                        break
                    writer.write(trickled[sent : sent + 1])
                    sent += 1
                    counts.trickle_bytes += 1
                    if first:
                        first = False
                        self.first_sent()
                    await asyncio.wait([answered], timeout=TRICKLE_SECONDS)
                else:
                    await asyncio.wait([answered], timeout=ANSWER_GRACE_SECONDS)
            finally:
                answered.cancel()
                writer.close()
            hang_up = None
            if answered.done() and not answered.cancelled():
                counts.trickle_closed += 1

    async def trickle_answers(self, reader: asyncio.StreamReader) -> None:
        """Read what the server says to a trickling client until it closes."""
        try:
            while True:
                answer = await answer_read(reader)
                self.counts.trickle_statuses[str(answer.status)] += 1
                if answer.close:
                    return
        except (OSError, EOFError, ValueError, asyncio.LimitOverrunError):
            return  # closed, with or without an answer: the client connects again

    async def run(self, commands: asyncio.StreamReader) -> None:
        spec = self.spec
        tasks = [asyncio.create_task(self.park(n)) for n in range(spec.parkers)]
        tasks += [asyncio.create_task(self.trickle(n)) for n in range(spec.tricklers)]
        if not tasks:
            self.all_started.set()
        await self.all_started.wait()
        print(self.counts.as_json(ready=True), flush=True)
        while (line := (await commands.readline()).strip()) not in (b"", b"stop"):
            if line == b"stats":
                print(self.counts.as_json(ready=True), flush=True)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        print(self.counts.as_json(ready=True, stopped=True), flush=True)


def open_files_raise() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


async def main(base: str, spec: Spec) -> None:
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    await Crowd(base, spec).run(commands)


if __name__ == "__main__":
    base, text = sys.argv[1:3]
    spec = Spec.of(text)
    limit = open_files_raise()
    needed = spec.parkers + spec.tricklers + 64
    if limit < needed:
        print(json.dumps({"ready": False, "error": f"open files limit {limit} < {needed}"}))
        sys.exit(1)
    asyncio.run(main(base, spec))
