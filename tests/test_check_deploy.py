"""Transport security by bind address: settings are read once per process, so each case runs
Django in a subprocess with its own environment (docs/reference.md#limits-and-faults)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_BIND = "0.0.0.0:8000"

# Signs a user in through the real login form and reports what the responses said.
PROBE = """
import json, sys
import django
django.setup()
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

call_command("migrate", verbosity=0)
User.objects.create_user("alice", password="alice-password")
secure = sys.argv[1] == "https"
client = Client(HTTP_HOST="127.0.0.1")
login = client.post(
    "/accounts/login/", {"username": "alice", "password": "alice-password"}, secure=secure
)
web_over_http = client.get("/web/")
healthz_over_http = client.get("/healthz")
api_over_http = client.get("/api/v1/openapi.json")
web_over_https = client.get("/web/", secure=True)
# Plain http from a TLS-terminating proxy that says the client used https.
web_behind_proxy = client.get("/web/", headers={"X-Forwarded-Proto": "https"})
print(json.dumps({
    "login": login.status_code,
    "session_cookie_secure": bool(login.cookies["sessionid"]["secure"]),
    "csrf_cookie_secure": bool(login.cookies["csrftoken"]["secure"]),
    "web_over_http": [web_over_http.status_code, web_over_http.get("Location")],
    "healthz_over_http": healthz_over_http.status_code,
    "api_over_http": api_over_http.status_code,
    "hsts": web_over_https.get("Strict-Transport-Security"),
    "web_behind_proxy": [
        web_behind_proxy.status_code, web_behind_proxy.get("Strict-Transport-Security")
    ],
}))
"""


def _env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    """This process's environment without any setting the server reads, plus ``overrides``."""
    read_by_settings = {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL"}
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in read_by_settings
        and not name.startswith(("AI_MEMORY_", "SECURE_", "SESSION_", "CSRF_"))
    }
    env["DJANGO_SETTINGS_MODULE"] = "aimemory_site.settings"
    env["AI_MEMORY_DATA_DIR"] = str(tmp_path / "data")
    return {**env, **overrides}


def _probe(tmp_path: Path, scheme: str, **env: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, scheme],
        cwd=ROOT,
        env=_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    answer: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return answer


@pytest.mark.slow
def test_check_deploy_is_clean_with_debug_off_on_a_public_bind(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=_env(
            tmp_path,
            DEBUG="0",
            AI_MEMORY_BIND=PUBLIC_BIND,
            SECRET_KEY=secrets.token_urlsafe(64),
            AI_MEMORY_ROOT_TOKEN="x",
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "System check identified no issues" in output
    assert "WARNINGS" not in output


@pytest.mark.slow
def test_on_the_loopback_default_cookies_work_over_plain_http(tmp_path: Path) -> None:
    answer = _probe(tmp_path, "http")
    assert answer["login"] == 302
    assert answer["session_cookie_secure"] is False
    assert answer["csrf_cookie_secure"] is False
    assert answer["web_over_http"] == [200, None]
    assert answer["hsts"] is None


@pytest.mark.slow
def test_on_a_public_bind_cookies_are_secure_and_http_is_redirected(tmp_path: Path) -> None:
    answer = _probe(tmp_path, "https", AI_MEMORY_BIND=PUBLIC_BIND, AI_MEMORY_ROOT_TOKEN="x")
    assert answer["login"] == 302
    assert answer["session_cookie_secure"] is True
    assert answer["csrf_cookie_secure"] is True
    assert answer["web_over_http"] == [301, "https://127.0.0.1/web/"]
    # Health checks and agents' clients call over plain http and must not be redirected.
    assert answer["healthz_over_http"] == 200
    assert answer["api_over_http"] == 200
    assert answer["hsts"] == "max-age=31536000; includeSubDomains"
    # Behind the TLS proxy, its X-Forwarded-Proto makes the request secure: no redirect loop.
    assert answer["web_behind_proxy"] == [200, "max-age=31536000; includeSubDomains"]


@pytest.mark.slow
def test_each_transport_setting_follows_its_django_named_variable(tmp_path: Path) -> None:
    answer = _probe(
        tmp_path,
        "https",
        SESSION_COOKIE_SECURE="1",
        CSRF_COOKIE_SECURE="1",
        SECURE_SSL_REDIRECT="1",
        SECURE_HSTS_SECONDS="600",
        SECURE_HSTS_PRELOAD="1",
    )
    assert answer["session_cookie_secure"] is True
    assert answer["csrf_cookie_secure"] is True
    assert answer["web_over_http"] == [301, "https://127.0.0.1/web/"]
    assert answer["hsts"] == "max-age=600; preload"
