"""``ai-memory serve`` runs the housekeeping itself, in its workers and off every
request's path (docs/reference.md#expiry-and-retention): a message whose expiry passed while no
server ran is stored as expired once a server starts, with no send to start it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import SEND
from tests.servers import serving, spawn_database_url

pytestmark = pytest.mark.slow


def _manage_shell(data_dir: Path, database_url: str | None, code: str) -> str:
    env = {**os.environ, "AI_MEMORY_DATA_DIR": str(data_dir)}
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    done = subprocess.run(
        [sys.executable, "-m", "aimemory_site.cli.main", "manage", "shell", "--no-imports", "-c", code],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def test_a_started_server_stores_a_passed_expiry_without_a_send(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with spawn_database_url("aimemory_housekeeping") as database_url:
        with serving(data_dir, database_prefix="", database_url=database_url) as (port, _):
            url = f"http://127.0.0.1:{port}"
            for project in (SEND["from_project"], SEND["to_project"]):
                session = {"workspace": "default", "project": project, "session_id": project}
                httpx.post(f"{url}/api/v1/sessions", json=session).raise_for_status()
            answer = httpx.post(f"{url}/api/v1/messages", json={**SEND, "expires_in_seconds": 60})
            answer.raise_for_status()
            message_id = answer.json()["message_id"]
        stored_state = (
            "from messaging.models import Message; "
            f"print(Message.objects.get(pk='{message_id}').state)"
        )
        _manage_shell(
            data_dir,
            database_url,
            "from datetime import timedelta; from django.utils import timezone; "
            "from messaging.models import Message; "
            f"Message.objects.filter(pk='{message_id}')"
            ".update(expires_at=timezone.now() - timedelta(seconds=1))",
        )
        assert _manage_shell(data_dir, database_url, stored_state) == "pending"

        with serving(data_dir, database_prefix="", database_url=database_url):
            deadline = time.monotonic() + 30
            while (state := _manage_shell(data_dir, database_url, stored_state)) == "pending":
                assert time.monotonic() < deadline, "the server never ran its housekeeping"

    assert state == "expired"
