"""A token issued in Django admin: its key is shown once, and never travels in a cookie."""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Iterator
from http.cookies import SimpleCookie
from urllib.parse import unquote

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.http import HttpResponseBase
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from tests.conftest import Persona

KEY = re.compile(r"aim_[A-Za-z0-9_-]{43}")


@pytest.fixture
def admin_client(client: Client, db: None) -> Client:
    admin = User.objects.create_superuser("admin", "admin@example.test", "admin-password")
    client.force_login(admin)
    return client


def readings(value: str) -> Iterator[str]:
    """``value`` as stored, URL-unquoted, and, for Django's signed values (``payload:...``,
    which the cookie message storage writes), the payload base64- and zlib-decoded."""
    yield value
    value = unquote(value).strip('"')
    yield value
    payload = value.split(":", 1)[0]
    compressed = payload.startswith(".")
    payload = payload.removeprefix(".")
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        yield (zlib.decompress(raw) if compressed else raw).decode(errors="replace")
    except (binascii.Error, zlib.error, ValueError):
        pass


def cookie_text(response: HttpResponseBase) -> str:
    """Every cookie the response sets, in every reading, as one text to search."""
    jar = SimpleCookie()
    for header, value in response.items():
        if header.lower() == "set-cookie":
            jar.load(value)
    jar.update(response.cookies)
    return "\n".join(text for morsel in jar.values() for text in readings(morsel.value))


def issue_token(client: Client, persona: Persona) -> tuple[str, list[HttpResponseBase]]:
    """Issue a token through the add form and follow to the next page by hand, so that
    every response of the flow is kept; return the key shown and the responses."""
    added = client.post("/admin/projects/apitoken/add/", {"user": persona.user.pk, "name": "ci"})
    assert added.status_code == 302
    shown = client.get(added["Location"])
    assert shown.status_code == 200
    [key] = KEY.findall(shown.content.decode())
    return key, [added, shown]


def test_the_new_key_is_shown_once_and_never_in_a_cookie(
    admin_client: Client, bob: Persona
) -> None:
    key, flow = issue_token(admin_client, bob)
    after = admin_client.get("/admin/projects/apitoken/")
    assert key not in after.content.decode()
    for response in [*flow, after]:
        assert key not in cookie_text(response)
    # Nor does the session keep it once shown.
    for session in Session.objects.all():
        assert key not in str(session.get_decoded())


def test_the_cookie_check_would_catch_a_key_in_the_message_cookie(
    admin_client: Client, bob: Persona, settings: SettingsWrapper
) -> None:
    # Django's default message storage puts the key in a signed cookie: the leak guarded
    # against above, which this check must be able to see.
    settings.MESSAGE_STORAGE = "django.contrib.messages.storage.fallback.FallbackStorage"
    key, [added, _shown] = issue_token(admin_client, bob)
    assert key in cookie_text(added)
