"""A parked call's right to look is decided again at every look (docs/serving.md#the-loop):
a token revoked, a grant removed or a project made restricted while it waits, and the
call answers what a new call would (401, or the 404 of a project it may not read), and
claims and learns nothing; after a wake and at its time-out alike.

Against ``ai-memory serve`` as it starts, with users' tokens; the admin's changes are made
with ``ai-memory manage``, as an operator makes them, on the server's database.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.servers import RawConnection, fresh_postgres_database, serving

pytestmark = pytest.mark.slow

POSTGRES = os.environ.get("DATABASE_URL", "").startswith("postgres")
WS = "acme"


@dataclass
class Deployment:
    port: int
    env: dict[str, str]  # of ``ai-memory manage`` on the server's database
    keys: dict[str, str]  # persona -> API key

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def manage(self, *arguments: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "aimemory_site.cli.main", "manage", *arguments],
            env=self.env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return done.stdout.strip()

    def client(self, persona: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.keys[persona]}"}, timeout=60
        )

    def park(self, persona: str, method: str, path: str, payload: dict[str, Any]) -> RawConnection:
        """A call sent on a connection of its own, whose answer is read later."""
        connection = RawConnection(self.port)
        body = json.dumps(payload).encode() if method == "POST" else b""
        headers = {"Authorization": f"Bearer {self.keys[persona]}"}
        if method == "POST":
            headers |= {"Content-Type": "application/json", "Content-Length": str(len(body))}
        connection.send(connection.head(method, path, headers) + body)
        return connection


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    data_dir = tmp_path_factory.mktemp("data")
    env = {**os.environ, "AI_MEMORY_DATA_DIR": str(data_dir)}
    env.pop("AI_MEMORY_ROOT_TOKEN", None)
    database = (
        fresh_postgres_database("aimemory_relook") if POSTGRES else contextlib.nullcontext(None)
    )
    with database as database_url:
        if database_url:
            env["DATABASE_URL"] = database_url
        else:
            env.pop("DATABASE_URL", None)
        with serving(data_dir, "--workers", "2", database_prefix="", database_url=database_url) as (
            port,
            _,
        ):
            deployment = Deployment(port, env, {})
            for persona in ("alice", "bob"):
                deployment.keys[persona] = deployment.manage(
                    "issue_token", persona, "--create-user"
                )
            yield deployment


def _project(deployment: Deployment, owner: str, name: str, session_id: str) -> dict[str, str]:
    """``acme/<name>``, started by ``owner``'s session ``session_id``."""
    scope = {"workspace": WS, "project": name}
    with deployment.client(owner) as client:
        client.post("/api/v1/sessions", json={**scope, "session_id": session_id}).raise_for_status()
    return scope


def _send(deployment: Deployment, sender: str, sender_scope: dict[str, str], to: str) -> str:
    with deployment.client(sender) as client:
        answer = client.post(
            "/api/v1/messages",
            json={
                "from_workspace": WS,
                "from_project": sender_scope["project"],
                "to_workspace": WS,
                "to_project": to,
                "body": "Please rotate the staging keys.",
            },
        )
    answer.raise_for_status()
    message_id: str = answer.json()["message_id"]
    return message_id


def _state(deployment: Deployment, persona: str, scope: dict[str, str], message_id: str) -> str:
    with deployment.client(persona) as client:
        answer = client.get(f"/api/v1/messages/{message_id}", params=scope)
    answer.raise_for_status()
    state: str = answer.json()["state"]
    return state


def test_a_pop_parked_with_a_token_revoked_meanwhile_answers_401_and_claims_nothing(
    deployment: Deployment,
) -> None:
    inbox = _project(deployment, "alice", "revoked-inbox", "alice-revoked")
    outbox = _project(deployment, "bob", "revoked-outbox", "bob-revoked")
    key = deployment.manage("issue_token", "alice", "--name", "to revoke")  # the key alone
    deployment.keys["alice-2"] = key
    parked = deployment.park(
        "alice-2", "POST", "/api/v1/messages/pop", {**inbox, "wait_seconds": 30}
    )
    _settle(deployment)

    deployment.manage("revoke_token", key[:12])
    message_id = _send(deployment, "bob", outbox, "revoked-inbox")
    answer = parked.answer()

    assert answer.status == 401
    assert answer.json()["code"] == "unauthorized"
    assert _state(deployment, "bob", outbox, message_id) == "pending"


def test_a_pop_parked_whose_grant_was_removed_gets_the_404_of_a_missing_project(
    deployment: Deployment,
) -> None:
    inbox = _project(deployment, "alice", "granted-inbox", "alice-granted")
    deployment.manage("project_mode", f"{WS}/granted-inbox", "restricted")
    deployment.manage("grant", "bob", f"{WS}/granted-inbox", "write")
    parked = deployment.park("bob", "POST", "/api/v1/messages/pop", {**inbox, "wait_seconds": 30})
    _settle(deployment)

    deployment.manage("grant", "bob", f"{WS}/granted-inbox", "none")
    message_id = _send(deployment, "alice", inbox, "granted-inbox")
    answer = parked.answer()

    assert answer.status == 404
    assert answer.json()["code"] == "project_not_found"
    assert _state(deployment, "alice", inbox, message_id) == "pending"


def test_a_pop_parked_on_a_project_made_restricted_gets_a_404(deployment: Deployment) -> None:
    inbox = _project(deployment, "alice", "closing-inbox", "alice-closing")
    parked = deployment.park("bob", "POST", "/api/v1/messages/pop", {**inbox, "wait_seconds": 30})
    _settle(deployment)

    deployment.manage("project_mode", f"{WS}/closing-inbox", "restricted")
    message_id = _send(deployment, "alice", inbox, "closing-inbox")
    answer = parked.answer()

    assert answer.status == 404
    assert answer.json()["code"] == "project_not_found"
    assert _state(deployment, "alice", inbox, message_id) == "pending"


def test_a_status_wait_whose_grant_was_removed_gets_a_404_at_its_time_out(
    deployment: Deployment,
) -> None:
    """Nothing wakes it: the message stays pending, and the answer at the time-out is
    decided again too."""
    inbox = _project(deployment, "alice", "status-inbox", "alice-status")
    deployment.manage("project_mode", f"{WS}/status-inbox", "restricted")
    deployment.manage("grant", "bob", f"{WS}/status-inbox", "read")
    message_id = _send(deployment, "alice", inbox, "status-inbox")
    query = f"workspace={WS}&project=status-inbox&wait_seconds=3"
    parked = deployment.park("bob", "GET", f"/api/v1/messages/{message_id}?{query}", {})
    _settle(deployment)

    deployment.manage("grant", "bob", f"{WS}/status-inbox", "none")
    answer = parked.answer()

    assert answer.status == 404
    assert answer.json()["code"] == "project_not_found"
    assert "state" not in answer.json()


def test_a_session_wait_whose_grant_was_removed_announces_nothing(
    deployment: Deployment,
) -> None:
    inbox = _project(deployment, "alice", "session-inbox", "alice-session")
    deployment.manage("project_mode", f"{WS}/session-inbox", "restricted")
    deployment.manage("grant", "bob", f"{WS}/session-inbox", "write")  # a session starts
    _project(deployment, "bob", "session-inbox", "bob-session")
    parked = deployment.park(
        "bob",
        "POST",
        "/api/v1/sessions/wait",
        {**inbox, "session_id": "bob-session", "wait_seconds": 30},
    )
    _settle(deployment)

    deployment.manage("grant", "bob", f"{WS}/session-inbox", "none")
    _send(deployment, "alice", inbox, "session-inbox")
    answer = parked.answer()

    assert answer.status == 404
    assert answer.json()["code"] == "project_not_found"
    assert "context" not in answer.json()


def _settle(deployment: Deployment) -> None:
    """Let the call just sent reach its park before the change under test: a request
    made now runs after the call's first look on a loaded machine as on an idle one,
    since ``ai-memory manage`` starts a whole Python first (half a second and more),
    while the call's look takes milliseconds. A change that came first would only make
    the call answer the same error at once, which these tests accept as well."""
    with deployment.client("alice") as client:
        client.get("/healthz").raise_for_status()
