"""Helpers for tests that spawn a real server process."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_healthy(url: str, proc: subprocess.Popen[bytes], deadline_s: float = 60) -> int:
    """Poll /healthz until it answers (the server is starting up), bounded in time."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            output = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"server exited with {proc.returncode}:\n{output}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                status: int = response.status
                return status
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)  # polling a process we do not control; no barrier exists
    raise AssertionError(f"{url} did not answer within {deadline_s}s")
