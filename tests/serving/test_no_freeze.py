"""No load freezes the server (docs/serving.md#caps): the probe that froze the threaded
worker for good (1,100 pops parked from one caller) now parks the caller's 200 and
refuses the rest at once, the server answers everyone else meanwhile, and within 5 s of
the last client closing its connection it answers ``/healthz`` again. Against
``ai-memory serve`` with one worker process, where the threaded worker froze at 520.
"""

from __future__ import annotations

import json
import resource
import selectors
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import SEND
from tests.servers import RawConnection, serving

pytestmark = [pytest.mark.slow, pytest.mark.alone]

PROBE = 1_100
PER_CALLER = 200  # the default of AI_MEMORY_MAX_WAITS_PER_CALLER
INBOX = {"workspace": "default", "project": "probed"}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < PROBE + 200:  # this process holds every connection of the probe
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * PROBE), hard))
    with serving(
        tmp_path_factory.mktemp("data"), "--workers", "1", database_prefix="aimemory_probe"
    ) as (port, _):
        url = f"http://127.0.0.1:{port}"
        for project in ("probed", SEND["from_project"], SEND["to_project"]):
            session = {"workspace": "default", "project": project, "session_id": f"s-{project}"}
            httpx.post(f"{url}/api/v1/sessions", json=session).raise_for_status()
        yield url


def test_the_probe_that_froze_the_threaded_worker_is_refused_past_the_cap(url: str) -> None:
    port = int(url.rsplit(":", 1)[1])
    body = json.dumps({**INBOX, "wait_seconds": 60}).encode()
    head_fields = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    probe: list[RawConnection] = []
    try:
        for _ in range(PROBE):
            connection = RawConnection(port)
            connection.send(connection.head("POST", "/api/v1/messages/pop", head_fields) + body)
            probe.append(connection)
        # The server reads them in its own time; every call past the cap is answered at
        # once, so the answers that come are the barrier. On a slow machine the last calls
        # of so large a burst on one process may wait past a request's database budget
        # (on PostgreSQL here, up to a sixth of them), and answer 503
        # database_unavailable with nothing done: a refusal too, never a park past the
        # cap (its place, if it had taken one, goes to a later call).
        answered = _answered(probe, PROBE - PER_CALLER, within=30)
        answers = [connection.answer() for connection in answered]
        codes = Counter(answer.json().get("code", answer.status) for answer in answers)
        assert set(codes) <= {"too_many_waits", "database_unavailable"}, codes
        assert len(answered) >= PROBE - PER_CALLER, codes  # at most 200 parked
        assert codes["too_many_waits"] >= (PROBE - PER_CALLER) // 2, codes  # the cap's

        # The others are served meanwhile, within the bound of any request.
        started = time.monotonic()
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
        sent = httpx.post(f"{url}/api/v1/messages", json=SEND, timeout=5)
        assert sent.status_code == 201
        assert time.monotonic() - started < 5
    finally:
        for connection in probe:
            connection.close()

    closed_at = time.monotonic()
    assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    assert time.monotonic() - closed_at < 5


def _answered(connections: list[RawConnection], count: int, within: float) -> list[RawConnection]:
    """The connections with an answer to read, once ``count`` of them have one (or
    ``within`` seconds have passed)."""
    with selectors.DefaultSelector() as selector:
        for connection in connections:
            selector.register(connection.sock, selectors.EVENT_READ, connection)
        ready: list[RawConnection] = []
        deadline = time.monotonic() + within
        while len(ready) < count and (left := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                selector.unregister(key.fileobj)
                ready.append(key.data)
        # A moment more: a call parked past the cap would answer now, and fail the test.
        for key, _ in selector.select(0.5):
            ready.append(key.data)
    return ready
