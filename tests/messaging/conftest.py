"""Messaging helpers: a send between the projects of the root conftest."""

from __future__ import annotations

from typing import Any

from aimemory_site.lib.principal import Principal
from messaging.models import Message
from messaging.services import message_send

ANON = Principal.anonymous()


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
    ).message
