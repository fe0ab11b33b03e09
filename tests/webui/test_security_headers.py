"""Browser-facing security headers, and templates that keep no inline code (docs/reference.md#limits-and-faults)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from tests.conftest import Persona
from webui.middleware import CONTENT_SECURITY_POLICY

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"

PATHS = [
    "/web/",
    "/web/w/default/alpha/",
    "/web/live/",
    "/web/w/default/alpha/live/",
    "/accounts/login/",
    "/admin/login/",
    "/api/v1/docs",
    "/api/v1/openapi.json",
    "/healthz",
    "/web/no-such-page/",
]


def _directives(policy: str) -> dict[str, str]:
    named = (directive.strip().partition(" ") for directive in policy.split(";"))
    return {name: value for name, _, value in named}


def test_the_policy_allows_no_inline_code_and_no_other_origin() -> None:
    directives = _directives(CONTENT_SECURITY_POLICY)
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["base-uri"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["form-action"] == "'self'"
    assert "unsafe" not in CONTENT_SECURITY_POLICY


@pytest.mark.parametrize("path", PATHS)
def test_every_response_carries_the_security_headers(client: Client, db: None, path: str) -> None:
    response = client.get(path)
    assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


def test_static_files_carry_the_policy_too(settings: SettingsWrapper) -> None:
    # Whitenoise answers these before the view layer; an SVG opened directly could run
    # script. Finders: the test run has not collected static files.
    settings.WHITENOISE_USE_FINDERS = True
    response = Client().get(f"{settings.STATIC_URL}admin/img/icon-yes.svg")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY


def test_pages_behind_the_login_carry_the_policy(
    client: Client, auth_on: str, alice: Persona
) -> None:
    client.force_login(alice.user)
    assert client.get("/web/")["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    admin = User.objects.create_superuser("admin", "admin@example.test", "admin-password")
    client.force_login(admin)
    response = client.get("/admin/projects/apitoken/add/")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY


INLINE_CODE = [
    # A <script> with a body instead of a src (JSON data blocks would be allowed, none exist).
    re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I),
    re.compile(r"<style\b", re.I),
    re.compile(r"\sstyle\s*=", re.I),
    re.compile(r"\son[a-z]+\s*=", re.I),
    re.compile(r"javascript:", re.I),
]


@pytest.mark.parametrize(
    "template", sorted(TEMPLATES.rglob("*.html")), ids=lambda p: str(p.relative_to(TEMPLATES))
)
def test_our_templates_keep_no_inline_script_or_style(template: Path) -> None:
    markup = template.read_text()
    for pattern in INLINE_CODE:
        assert not pattern.search(markup), f"{pattern.pattern} in {template.name}"


def test_a_csrf_failure_is_a_page_of_ours_that_needs_no_inline_style(
    db: None, auth_on: str
) -> None:
    # Django's built-in CSRF failure page styles itself inline, which the policy refuses.
    response = Client(enforce_csrf_checks=True).post(
        "/accounts/login/", {"username": "alice", "password": "alice-password"}
    )
    assert response.status_code == 403
    markup = response.content.decode()
    assert "<title>Forbidden · ai-memory</title>" in markup
    assert "The form has expired" in markup
    assert "<style" not in markup
