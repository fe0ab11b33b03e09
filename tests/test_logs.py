"""No secret and no message body ever reaches the server's log: a real ``ai-memory serve``
with its access log, sent a message with a planted secret on REST and MCP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.servers import free_port, wait_healthy

# Planted: a GitHub token (scrubbed before storage) and a marker only the body holds.
SECRET = "ghp_" + "Zq8" * 12
BODY_MARKER = "body-marker-7f3a9c"
SUBJECT_MARKER = "subject-marker-51d0"


def _post(url: str, payload: dict[str, Any], headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.slow
def test_a_planted_secret_and_the_body_stay_out_of_the_log(tmp_path: Path) -> None:
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "AI_MEMORY_ROOT_TOKEN")
    }
    env |= {"AI_MEMORY_DATA_DIR": str(tmp_path / "data"), "AI_MEMORY_LOG_LEVEL": "DEBUG"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "aimemory_site.cli.main", "serve", "--bind", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(f"{base}/healthz", proc)
        for project in ("project-a", "project-b"):
            start = {"workspace": "default", "project": project, "session_id": f"s-{project}"}
            assert _post(f"{base}/api/v1/sessions", start) == 200
        send = {
            "to_workspace": "default",
            "to_project": "project-b",
            "from_workspace": "default",
            "from_project": "project-a",
            "subject": f"{SUBJECT_MARKER} {SECRET}",
            "body": f"{BODY_MARKER}: use {SECRET} to push",
        }
        assert _post(f"{base}/api/v1/messages", send) == 201
        # Refused sends, whose bodies an error path might echo into the log.
        assert _post(f"{base}/api/v1/messages", {**send, "to_project": "nope"}) == 404
        assert _post(f"{base}/api/v1/messages", {**send, "extra": 1}) == 422
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "memory_message_send", "arguments": send},
        }
        assert _post(f"{base}/mcp", call, {"MCP-Protocol-Version": "2025-11-25"}) == 200
        assert (
            _post(f"{base}/api/v1/messages/pop", {"workspace": "default", "project": "project-b"})
            == 200
        )
    finally:
        proc.terminate()
        log = proc.communicate(timeout=30)[0].decode()

    assert "POST /api/v1/messages" in log, "the access log is on, so this test reads it"
    for planted in (SECRET, SECRET[:12], BODY_MARKER, SUBJECT_MARKER):
        assert planted not in log
