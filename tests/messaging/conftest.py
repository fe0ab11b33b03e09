"""Messaging fixtures: projects A (sender), B (recipient) and C (a bystander)."""

from __future__ import annotations

from typing import Any

import pytest

from messaging.models import Message
from messaging.services import message_send
from projects.access import Principal
from projects.models import Project
from tests.conftest import make_project

ANON = Principal.anonymous()


@pytest.fixture
def project_a(db: None) -> Project:
    return make_project(None, "default", "project-a")


@pytest.fixture
def project_b(db: None) -> Project:
    return make_project(None, "default", "project-b")


@pytest.fixture
def project_c(db: None) -> Project:
    return make_project(None, "default", "project-c")


def send(
    body: str = "Please add a /v1/export endpoint.",
    *,
    to: str = "project-b",
    sender: str = "project-a",
    principal: Principal = ANON,
    **extra: Any,
) -> Message:
    return message_send(
        principal=principal,
        to_workspace="default",
        to_project=to,
        from_workspace="default",
        from_project=sender,
        body=body,
        **extra,
    )
