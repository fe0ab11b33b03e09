"""The bench's wrk scripts time each request as it was sent (``bench/wrk/common.lua``),
beside wrk's own percentiles, which wrk 4 corrects for coordinated omission. What
``docs/benchmarks.md`` says about the two is checked here against a stub server that
stalls exactly once."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench.harness import wrk

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("wrk") is None, reason="needs wrk (apt-get install wrk)"),
]

STALL_SECONDS = 0.5
STALL_AT = 50  # the one request that stalls, after wrk's connections are warm


class _StallsOnce(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the bench's server serves
    disable_nagle_algorithm = True  # else every answer waits for the client's delayed ACK
    served = 0
    lock = threading.Lock()

    def do_GET(self) -> None:  # http.server's name
        with self.lock:
            type(self).served += 1
            stall = type(self).served == STALL_AT
        if stall:
            time.sleep(STALL_SECONDS)  # the stall under test
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:  # http.server's name
        pass


@pytest.fixture
def stub() -> Iterator[str]:
    _StallsOnce.served = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StallsOnce)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_one_stall_is_one_slow_request_as_sent(stub: str) -> None:
    load = wrk(stub, "get.lua", 1, 2, BENCH_PATH="/")
    assert load.errors == 0
    assert load.requests > 20 * STALL_AT  # the stall is one request in many
    assert load.sent_over_100ms == 1
    assert load.sent_max_ms >= STALL_SECONDS * 1000
    assert load.sent_p99_ms < 100
    # wrk's own histogram counts the requests that would have queued behind the stall.
    assert load.p99_ms >= 100


def test_every_connection_is_timed(stub: str) -> None:
    """One wrk thread per connection, so each thread's requests and answers alternate."""
    load = wrk(stub, "get.lua", 4, 2, BENCH_PATH="/")
    assert load.errors == 0
    assert load.sent_over_100ms >= 1  # the stall, seen by the connection it held up
    assert 0 < load.sent_p50_ms < 100
