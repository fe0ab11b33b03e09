from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.django_db
def test_healthz_checks_the_database(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_oversized_body_is_refused_with_413(client: Client) -> None:
    response = client.post(
        "/api/v1/messages", b"x" * (1024 * 1024 + 1), content_type="application/json"
    )
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


@pytest.mark.django_db
def test_a_foreign_host_name_is_refused_on_a_loopback_server(client: Client) -> None:
    """A page on a rebound DNS name must not reach a server bound to loopback."""
    assert client.get("/healthz", headers={"Host": "rebound.example"}).status_code == 400
    assert client.get("/healthz", headers={"Host": "127.0.0.1:8000"}).status_code == 200
