"""A send wakes one pop parked on its inbox, and every message is claimed exactly once
however many pops wait and sends arrive together (docs/serving.md#one-wake-per-message),
against ``ai-memory serve`` with two worker processes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import SEND
from tests.servers import RawConnection, serving

pytestmark = pytest.mark.slow

POPS = SENDS = 30
INBOX = {"workspace": "default", "project": "herd"}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(
        tmp_path_factory.mktemp("data"), "--workers", "2", database_prefix="aimemory_herd"
    ) as (port, _):
        url = f"http://127.0.0.1:{port}"
        for project in ("herd", SEND["from_project"]):
            session = {"workspace": "default", "project": project, "session_id": f"s-{project}"}
            httpx.post(f"{url}/api/v1/sessions", json=session).raise_for_status()
        yield url


def _park(url: str) -> RawConnection:
    port = int(url.rsplit(":", 1)[1])
    connection = RawConnection(port)
    body = json.dumps({**INBOX, "wait_seconds": 30}).encode()
    head = connection.head(
        "POST",
        "/api/v1/messages/pop",
        {"Content-Type": "application/json", "Content-Length": str(len(body))},
    )
    connection.send(head + body)
    return connection


def test_thirty_parked_pops_and_thirty_sends_claim_each_message_once(url: str) -> None:
    parked = [_park(url) for _ in range(POPS)]

    def send(_: int) -> str:
        answer = httpx.post(f"{url}/api/v1/messages", json={**SEND, "to_project": "herd"})
        answer.raise_for_status()
        message_id: str = answer.json()["message_id"]
        return message_id

    try:
        with ThreadPoolExecutor(max_workers=10) as pool:
            sent = list(pool.map(send, range(SENDS)))
        claimed = [connection.answer().json()["message"]["id"] for connection in parked]
    finally:
        for connection in parked:
            connection.close()

    assert sorted(claimed) == sorted(sent)  # each once, to exactly one pop
    left = httpx.get(f"{url}/api/v1/messages", params=INBOX).json()["messages"]
    assert left == []
