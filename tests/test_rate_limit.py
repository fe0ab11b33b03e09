"""``AI_MEMORY_RATE_LIMIT``: N requests per window per token (per address when anonymous),
then 429 ``rate_limited`` with ``Retry-After`` (docs/reference.md#limits-and-faults)."""

from __future__ import annotations

import json
import math
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.http import HttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.rate_limit_middleware import RateLimitMiddleware
from messaging.models import Message
from projects.checks import rate_limit_setting_check
from projects.models import ApiToken, Project, RateWindow
from projects.rate_limits import RateLimit, rate_limit_parse
from tests.conftest import SEND, B, Persona
from tests.mcp_raw import RawMcp, error_of
from tests.servers import free_port, fresh_postgres_database, wait_healthy
from tests.test_error_answers import database_unreachable
from tests.test_serve import _serve

MIDDLEWARE = "aimemory_site.rate_limit_middleware.RateLimitMiddleware"
COMMONS = {"workspace": "default", "project": "commons"}


def window_with_room(period_s: int, room_s: float) -> None:
    """Return at once when the current window has ``room_s`` left, else at the start of the
    next one: a test's requests then all fall in one window."""
    left = period_s - time.time() % period_s
    if left < room_s:
        time.sleep(left)  # until a boundary computed from the clock


def _limit(settings: SettingsWrapper, value: str) -> None:
    """Set the limit; a Client made after this loads its middleware with it."""
    settings.AI_MEMORY_RATE_LIMIT = value


@pytest.mark.django_db
def test_a_token_over_the_limit_gets_429_rate_limited_with_retry_after(
    settings: SettingsWrapper, auth_on: str, alice: Persona, alices_open: Project
) -> None:
    _limit(settings, "2/minute")
    client = Client(headers={"Authorization": f"Bearer {alice.token}"})
    window_with_room(60, 5)

    allowed = [client.get("/api/v1/messages", COMMONS).status_code for _ in range(2)]
    left_before = 60 - time.time() % 60
    refused = client.get("/api/v1/messages", COMMONS)
    left_after = 60 - time.time() % 60

    assert allowed == [200, 200]
    assert refused.status_code == 429
    assert refused["Content-Type"] == "application/json"
    assert refused.json()["code"] == "rate_limited"
    assert "2 requests per minute" in refused.json()["detail"]
    # The seconds until this window ends, rounded up: not a constant.
    assert math.ceil(left_after) <= int(refused["Retry-After"]) <= math.ceil(left_before)


@pytest.mark.django_db
def test_the_counter_holds_the_tokens_keyed_hash_never_the_token(
    settings: SettingsWrapper, auth_on: str, alice: Persona, alices_open: Project
) -> None:
    _limit(settings, "5/minute")
    Client(headers={"Authorization": f"Bearer {alice.token}"}).get("/api/v1/messages", COMMONS)

    key_hash = ApiToken.objects.get(user=alice.user).key_hash
    assert list(RateWindow.objects.values_list("key", "count")) == [(f"t:{key_hash}", 1)]


@pytest.mark.django_db
def test_another_token_is_unaffected_by_one_over_the_limit(
    settings: SettingsWrapper, auth_on: str, alice: Persona, bob: Persona, alices_open: Project
) -> None:
    _limit(settings, "1/minute")
    as_alice = Client(headers={"Authorization": f"Bearer {alice.token}"})
    as_bob = Client(headers={"Authorization": f"Bearer {bob.token}"})
    window_with_room(60, 5)

    statuses = [as_alice.get("/api/v1/messages", COMMONS).status_code for _ in range(2)]
    bobs = as_bob.get("/api/v1/messages", COMMONS)

    assert statuses == [200, 429]
    assert bobs.status_code == 200


@pytest.mark.django_db
def test_anonymous_callers_are_counted_per_address(
    settings: SettingsWrapper, project_b: Project
) -> None:
    _limit(settings, "1/minute")
    client = Client()
    window_with_room(60, 5)

    first = [client.get("/api/v1/messages", B, REMOTE_ADDR="192.0.2.1").status_code]
    first.append(client.get("/api/v1/messages", B, REMOTE_ADDR="192.0.2.1").status_code)
    other = client.get("/api/v1/messages", B, REMOTE_ADDR="192.0.2.2")

    assert first == [200, 429]
    assert other.status_code == 200


def _random_bearer() -> dict[str, str]:
    return {"Authorization": f"Bearer aim_{secrets.token_urlsafe(32)}"}


@pytest.mark.django_db
def test_random_bearers_count_against_their_address_and_add_no_rows(
    settings: SettingsWrapper, auth_on: str, alice: Persona, alices_open: Project
) -> None:
    _limit(settings, "5/hour")
    client = Client(REMOTE_ADDR="192.0.2.7")
    window_with_room(3600, 120)
    client.get("/api/v1/messages", COMMONS, headers={"Authorization": f"Bearer {alice.token}"})
    rows_before = RateWindow.objects.count()

    statuses = [
        client.get("/api/v1/messages", COMMONS, headers=_random_bearer()).status_code
        for _ in range(60)
    ]
    alices = client.get(
        "/api/v1/messages", COMMONS, headers={"Authorization": f"Bearer {alice.token}"}
    )

    assert statuses == [401] * 5 + [429] * 55
    assert RateWindow.objects.count() == rows_before + 1  # the address's one counter
    assert alices.status_code == 200  # a real token counts apart from its address


@pytest.mark.django_db
def test_a_revoked_token_counts_against_its_address(
    settings: SettingsWrapper, auth_on: str, alice: Persona, alices_open: Project
) -> None:
    _limit(settings, "2/hour")
    client = Client(REMOTE_ADDR="192.0.2.8")
    window_with_room(3600, 120)
    as_alice = {"Authorization": f"Bearer {alice.token}"}
    alices = client.get("/api/v1/messages", COMMONS, headers=as_alice).status_code
    ApiToken.objects.filter(user=alice.user).update(revoked_at=timezone.now())

    statuses = [client.get("/api/v1/messages", COMMONS).status_code for _ in range(2)]
    revoked = client.get("/api/v1/messages", COMMONS, headers=as_alice)

    assert (alices, statuses) == (200, [401, 401])
    assert revoked.status_code == 429


@pytest.mark.django_db
def test_an_anonymous_server_counts_by_address_whatever_bearer_is_sent(
    settings: SettingsWrapper, project_a: Project, project_b: Project
) -> None:
    _limit(settings, "3/hour")
    client = Client(REMOTE_ADDR="192.0.2.9")
    window_with_room(3600, 120)

    statuses = [
        client.post(
            "/api/v1/messages",
            {**SEND, "body": f"send {n}"},
            content_type="application/json",
            headers=_random_bearer(),
        ).status_code
        for n in range(10)
    ]

    assert statuses == [201] * 3 + [429] * 7
    assert Message.objects.count() == 3
    assert list(RateWindow.objects.values_list("key", flat=True)) == ["a:192.0.2.9"]


@pytest.mark.django_db
def test_a_refused_request_changes_nothing(
    settings: SettingsWrapper, project_a: Project, project_b: Project
) -> None:
    _limit(settings, "1/minute")
    client = Client()
    window_with_room(60, 5)

    sent = client.post("/api/v1/messages", SEND, content_type="application/json")
    refused = client.post(
        "/api/v1/messages", {**SEND, "body": "a second one"}, content_type="application/json"
    )

    assert sent.status_code == 201
    assert refused.status_code == 429
    assert list(Message.objects.values_list("body", flat=True)) == [SEND["body"]]


@pytest.mark.django_db
def test_mcp_over_the_limit_is_http_429_with_a_json_rpc_error(
    settings: SettingsWrapper, mcp: RawMcp
) -> None:
    _limit(settings, "1/minute")
    window_with_room(60, 5)

    mcp.result("tools/list")
    refused = mcp.request("tools/list")

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    error = error_of(refused)
    assert error["code"] == 429
    assert error["data"]["code"] == "rate_limited"
    assert "1 requests per minute" in error["message"]


@pytest.mark.django_db
def test_the_hook_route_is_limited_and_health_and_web_pages_are_not(
    settings: SettingsWrapper, project_b: Project
) -> None:
    _limit(settings, "1/minute")
    client = Client()
    window_with_room(60, 5)

    handoffs = [client.get("/handoff", B).status_code for _ in range(2)]
    health = [client.get("/healthz").status_code for _ in range(3)]
    web = [client.get("/web/").status_code for _ in range(3)]

    assert handoffs == [200, 429]
    assert health == [200, 200, 200]
    assert 429 not in web


@pytest.mark.django_db
def test_a_caller_is_served_again_once_the_window_ends(
    settings: SettingsWrapper, project_b: Project
) -> None:
    _limit(settings, "1/second")
    client = Client()
    window_with_room(1, 0.6)

    in_window = [client.get("/api/v1/messages", B).status_code for _ in range(2)]
    retry_after = client.get("/api/v1/messages", B)["Retry-After"]
    window_with_room(1, 1)  # always waits: no window has a whole second left
    next_window = client.get("/api/v1/messages", B)

    assert in_window == [200, 429]
    assert retry_after == "1"
    assert next_window.status_code == 200
    # The first request of the new window dropped the old window's row.
    assert RateWindow.objects.count() == 1


@pytest.mark.django_db
def test_no_limit_set_costs_no_query(
    settings: SettingsWrapper,
    project_b: Project,
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    settings.MIDDLEWARE = [name for name in settings.MIDDLEWARE if name != MIDDLEWARE]
    with CaptureQueriesContext(connection) as without_middleware:
        Client().get("/api/v1/messages", B)
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, MIDDLEWARE]
    _limit(settings, "")
    with django_assert_num_queries(len(without_middleware)):
        Client().get("/api/v1/messages", B)
    # The same measure sees the counter when a limit is set, so the equality above can fail.
    _limit(settings, "100/minute")
    with CaptureQueriesContext(connection) as limited:
        Client().get("/api/v1/messages", B)
    assert len(limited) > len(without_middleware)


@pytest.mark.django_db(transaction=True)
def test_a_database_outage_while_counting_answers_503_not_500(
    settings: SettingsWrapper, project_b: Project
) -> None:
    _limit(settings, "5/minute")
    client = Client(raise_request_exception=False)
    window_with_room(60, 5)

    with database_unreachable():
        during = client.get("/api/v1/messages", B)
        mcp = client.post(
            "/mcp",
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            content_type="application/json",
            headers={"MCP-Protocol-Version": "2025-11-25"},
        )
    healed = client.get("/api/v1/messages", B)

    assert during.status_code == 503
    assert during.json()["code"] == "database_unavailable"
    assert mcp.status_code == 503
    assert healed.status_code == 200
    assert RateWindow.objects.get().count == 1  # the outage counted nothing


@pytest.mark.parametrize(
    ("value", "limit"),
    [
        ("120/minute", RateLimit(120, 60, "minute")),
        ("5/second", RateLimit(5, 1, "second")),
        (" 1 / Hour ", RateLimit(1, 3600, "hour")),
        ("", None),
    ],
)
def test_a_good_setting_parses(value: str, limit: RateLimit | None) -> None:
    assert rate_limit_parse(value) == limit


@pytest.mark.parametrize("value", ["120", "ten/minute", "0/minute", "5/day", "5/minute/x"])
def test_a_bad_setting_is_a_system_check_error(settings: SettingsWrapper, value: str) -> None:
    _limit(settings, value)

    [error] = rate_limit_setting_check()
    registered = [message.id for message in run_checks() if message.id == "projects.E001"]
    with pytest.raises(ImproperlyConfigured):
        RateLimitMiddleware(lambda request: HttpResponse())  # fails at start, not per request

    assert error.id == "projects.E001"
    assert repr(value) in error.msg
    assert registered == ["projects.E001"]


def test_a_good_setting_passes_the_check(settings: SettingsWrapper) -> None:
    _limit(settings, "60/minute")
    assert rate_limit_setting_check() == []


def _status(url: str) -> int:
    """GET over a fresh connection (urllib opens one per request)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code


def _stop(proc: subprocess.Popen[bytes], logs: list[str]) -> None:
    proc.terminate()
    logs.append(proc.communicate(timeout=30)[0].decode(errors="replace"))


@pytest.mark.slow
def test_the_count_is_shared_by_every_worker_and_every_server_of_one_database(
    tmp_path: Path,
) -> None:
    """Two ``ai-memory serve`` of two workers each on one database, called in turn: the
    N + k requests of one caller get exactly k refusals, wherever they land."""
    allowed, over = 6, 4
    env = {"AI_MEMORY_RATE_LIMIT": f"{allowed}/hour"}
    logs: list[str] = []
    with ExitStack() as stack:
        if os.environ.get("DATABASE_URL", "").startswith("postgres"):
            env["DATABASE_URL"] = stack.enter_context(fresh_postgres_database())
        ports = []
        for _ in range(2):  # one after the other: the first one migrates the database
            port = free_port()
            proc = _serve(tmp_path / "data", "--bind", f"127.0.0.1:{port}", "--workers", "2", **env)
            stack.callback(_stop, proc, logs)
            assert wait_healthy(f"http://127.0.0.1:{port}/healthz", proc) == 200
            ports.append(port)
        window_with_room(3600, 30)
        statuses = [
            _status(f"http://127.0.0.1:{ports[n % 2]}/api/v1/messages?workspace=w&project=p")
            for n in range(allowed + over)
        ]

    # 404: the project does not exist, which is the view's answer once the limit admits.
    assert statuses == [404] * allowed + [429] * over, "\n".join(logs)
