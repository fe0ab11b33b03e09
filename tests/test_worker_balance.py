"""A new connection goes to the gunicorn worker that holds fewest
(``aimemory_site.gunicorn_worker``), against a spawned ``ai-memory serve``.

A client keeps its connection, and its requests stay with the worker that took it; when
workers took connections as they woke, eight clients came to rest on four workers as
7 + 1, and one worker's requests queued while the others idled.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.servers import children, serving, serving_process, wait_for_workers

pytestmark = pytest.mark.slow

ROUNDS = 10


@dataclass
class Served:
    port: int
    workers: set[int]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data_dir = tmp_path_factory.mktemp("data")
    options = ("--workers", "2", "--threads", "1")
    with serving(data_dir, *options, database_prefix="aimemory_balance") as (port, proc):
        wait_for_workers(proc.pid, 2)
        yield Served(port, children(proc.pid))


def _kept_alive(port: int) -> socket.socket:
    """A connection that has had one answer and stays open, as a client's pool keeps it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(4096)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    length = int(
        next(x for x in head.split(b"\r\n") if x.lower().startswith(b"content-length:")).split(
            b":"
        )[1]
    )
    while len(body) < length:
        body += sock.recv(4096)
    return sock


def _closed_everywhere(served: Served, client_ports: list[int]) -> None:
    """Until no worker holds these connections any more (it closes its side once it reads
    the client's end), so the next round starts with both workers holding none."""
    deadline = time.monotonic() + 10
    while any(serving_process(served.port, p, served.workers) for p in client_ports):
        assert time.monotonic() < deadline, "the server kept closed connections open"
        time.sleep(0.01)  # another process's sockets: /proc is all there is to watch


def test_a_second_connection_goes_to_the_worker_holding_none(served: Served) -> None:
    split = 0
    for _ in range(ROUNDS):
        first, second = _kept_alive(served.port), _kept_alive(served.port)
        ports = [first.getsockname()[1], second.getsockname()[1]]
        try:
            holders = [serving_process(served.port, p, served.workers) for p in ports]
            assert None not in holders
            split += holders[0] != holders[1]
        finally:
            first.close()
            second.close()
        _closed_everywhere(served, ports)
    # Taken as the workers woke, the second connection went to the first one's worker
    # about every other round; one late wake-up on a loaded machine may still do so.
    assert split >= ROUNDS - 1, f"{split} of {ROUNDS} second connections went to the idle worker"
