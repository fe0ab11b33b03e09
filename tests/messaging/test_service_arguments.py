"""The messaging services parse the raw arguments every surface hands them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from aimemory_site.lib.errors import BadRequest, Code
from messaging.selectors import message_status
from messaging.services import message_cancel, message_pop, message_send
from tests.messaging.conftest import ANON

# An unknown project: a bad argument is refused before any project is looked up.
WHERE = {"principal": ANON, "workspace": "default", "project": "no-such-project"}
SEND = {
    "principal": ANON,
    "to_workspace": "default",
    "to_project": "no-such-project",
    "from_workspace": "default",
    "from_project": "no-such-project",
    "body": "hi",
}

CASES: list[tuple[Callable[..., Any], dict[str, Any], str]] = [
    (message_send, {**SEND, "in_reply_to": "not-a-uuid"}, Code.INVALID_IN_REPLY_TO),
    (message_send, {**SEND, "idempotency_key": ""}, Code.INVALID_IDEMPOTENCY_KEY),
    (message_pop, {**WHERE, "message_id": "12345"}, Code.INVALID_MESSAGE_ID),
    (message_pop, {**WHERE, "request_id": "r" * 201}, Code.INVALID_REQUEST_ID),
    (message_cancel, {**WHERE, "message_id": "12345"}, Code.INVALID_MESSAGE_ID),
    (message_status, {**WHERE, "message_id": "12345"}, Code.INVALID_MESSAGE_ID),
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("service", "arguments", "code"), CASES, ids=[f"{c[0].__name__}-{c[2]}" for c in CASES]
)
def test_a_service_refuses_a_malformed_raw_argument_itself(
    service: Callable[..., Any], arguments: dict[str, Any], code: str
) -> None:
    with pytest.raises(BadRequest) as refused:
        service(**arguments)
    assert refused.value.code == code
