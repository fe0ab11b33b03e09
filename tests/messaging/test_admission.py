"""Admission webhooks around send, pop and cancel, against a real HTTP receiver.

The receiver is a ``ThreadingHTTPServer`` on a free loopback port. It records every
request, answers the status a test chose for that path, and can hold its answer until the
test sets an Event: that makes a decider time out, and shows an observer does not delay
the response, without any sleeping in the tests.

Observers are posted after the commit, so the tests that need them run with
``transaction=True``: there the commit is real and the receiver's thread can read it.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib.errors import Forbidden
from messaging import admission, admission_config
from messaging.admission import AdmissionRefused
from messaging.models import Message
from messaging.services import message_cancel, message_pop
from projects.models import Activity, AgentSession, Project
from projects.services import session_start
from tests.conftest import A, ApiCall, B, Persona
from tests.mcp_raw import RawMcp
from tests.messaging.conftest import ANON, send
from tests.servers import free_port

# Long enough for a loaded CI machine; a missing delivery still fails the test.
WAIT_SECONDS = 10

SEND = {
    "to_workspace": "default",
    "to_project": "project-b",
    "from_workspace": "default",
    "from_project": "project-a",
    "subject": "secret-subject-xyz",
    "body": "secret-body-xyz: add a /v1/export endpoint.",
}


@dataclass(frozen=True)
class Delivery:
    path: str
    headers: dict[str, str]
    raw: str
    # How many messages the receiver's own database connection saw on arrival.
    visible_messages: int | None

    @property
    def payload(self) -> Any:
        return json.loads(self.raw)


@dataclass
class Receiver:
    """A webhook endpoint: what it received, what it answers, which answers it holds."""

    port: int
    deliveries: queue.Queue[Delivery] = field(default_factory=queue.Queue)
    statuses: dict[str, int] = field(default_factory=dict)
    held: dict[str, threading.Event] = field(default_factory=dict)
    count_messages: bool = False

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def hold(self, path: str) -> threading.Event:
        """Hold the answers to ``path`` until the returned Event is set."""
        event = threading.Event()
        self.held[path] = event
        return event

    def next(self) -> Delivery:
        return self.deliveries.get(timeout=WAIT_SECONDS)

    def assert_no_more(self) -> None:
        assert self.deliveries.empty(), self.deliveries.get_nowait()


class _Server(ThreadingHTTPServer):
    receiver: Receiver


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        receiver = cast(_Server, self.server).receiver
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        visible = None
        if receiver.count_messages:
            try:
                visible = Message.objects.count()
            finally:
                connection.close()  # this thread's own connection; never left open
        # Recorded before any hold, so a test sees the request arrive while it is held.
        receiver.deliveries.put(Delivery(self.path, dict(self.headers), raw, visible))
        event = receiver.held.get(self.path)
        if event is not None:
            event.wait(WAIT_SECONDS)
        try:
            self.send_response(receiver.statuses.get(self.path, 200))
            self.send_header("Content-Length", "0")
            self.end_headers()
        except (BrokenPipeError, ConnectionResetError):
            pass  # a decider that timed out has hung up already

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.receiver = Receiver(port=server.server_address[1])
    # A short poll interval: shutdown() waits up to one interval.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server.receiver
    for event in server.receiver.held.values():
        event.set()
    server.shutdown()
    server.server_close()
    thread.join(WAIT_SECONDS)


Hooks = Callable[..., None]


@pytest.fixture
def hooks(settings: SettingsWrapper) -> Hooks:
    """``hooks({...}, {...})`` configures these webhooks (JSON form) for the test."""

    def configure(*webhooks: dict[str, Any]) -> None:
        settings.AI_MEMORY_ADMISSION_WEBHOOKS_JSON = json.dumps(list(webhooks))

    return configure


@pytest.fixture(autouse=True)
def _no_inherited_hooks(settings: SettingsWrapper) -> None:
    settings.AI_MEMORY_ADMISSION_WEBHOOKS_JSON = ""


def gate(receiver: Receiver, path: str, *events: str, **extra: Any) -> dict[str, Any]:
    """A deciding hook (blocking, reject) named after its path."""
    return {
        "name": path.strip("/"),
        "url": receiver.url(path),
        "events": list(events or ["message_send"]),
        "failure_policy": "reject",
        **extra,
    }


def observer(receiver: Receiver, path: str, *events: str, **extra: Any) -> dict[str, Any]:
    """An observing hook (failure_policy ignore) named after its path."""
    return {
        "name": path.strip("/"),
        "url": receiver.url(path),
        "events": list(events or admission_config.OPS),
        **extra,
    }


def dead_url() -> str:
    """A loopback URL nobody listens on: the port was free a moment ago."""
    port = free_port()
    return f"http://127.0.0.1:{port}/gate"


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: queue.Queue[logging.LogRecord] = queue.Queue()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.put(record)


@pytest.fixture
def admission_log() -> Iterator[queue.Queue[logging.LogRecord]]:
    """Records of the admission logger (the logging plugin is off in the test command)."""
    handler = _Records()
    logging.getLogger(admission.__name__).addHandler(handler)
    yield handler.records
    logging.getLogger(admission.__name__).removeHandler(handler)


def pop_b(session: AgentSession | None = None) -> Message | None:
    return message_pop(principal=ANON, workspace="default", project="project-b", session=session)


def cancel_a() -> int:
    return message_cancel(principal=ANON, workspace="default", project="project-a")


def _refused(verb: str, reason: str) -> str:
    return f"message {verb} refused by admission: {reason}"


# Deciders ------------------------------------------------------------------------------


def test_a_refusing_decider_is_a_403_and_nothing_is_written(
    api: ApiCall, hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    hooks(gate(receiver, "/gate"))
    receiver.statuses["/gate"] = 500
    status, body = api("post", "/api/v1/messages", SEND)
    assert (status, body) == (
        403,
        {
            "detail": _refused("send", "webhook 'gate' answered HTTP 500"),
            "code": "admission_refused",
        },
    )
    assert receiver.next().payload["ctx"]["op"] == "message_send"
    assert not Message.objects.exists()
    assert not Activity.objects.filter(kind=Activity.Kind.MESSAGE_SENT).exists()
    assert api("get", "/api/v1/messages", B) == (200, {"messages": []})


def test_the_service_raises_admission_refused_a_forbidden(
    hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    hooks(gate(receiver, "/gate"))
    receiver.statuses["/gate"] = 403
    with pytest.raises(AdmissionRefused) as refused:
        send()
    assert isinstance(refused.value, Forbidden)
    assert (refused.value.code, refused.value.http_status) == ("admission_refused", 403)
    assert refused.value.message == _refused("send", "webhook 'gate' answered HTTP 403")
    assert not Message.objects.exists()


def test_an_accepting_decider_lets_the_send_happen(
    api: ApiCall, hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    hooks(gate(receiver, "/gate"))
    receiver.statuses["/gate"] = 204
    status, body = api("post", "/api/v1/messages", SEND)
    assert status == 201, body
    assert receiver.next().path == "/gate"
    assert Message.objects.get().body == SEND["body"]


def test_an_unreachable_decider_refuses(
    api: ApiCall, hooks: Hooks, project_a: Project, project_b: Project
) -> None:
    hooks(
        {"name": "gate", "url": dead_url(), "events": ["message_send"], "failure_policy": "reject"}
    )
    status, body = api("post", "/api/v1/messages", SEND)
    assert status == 403
    assert body["detail"].startswith(_refused("send", "webhook 'gate' is unreachable: "))
    assert not Message.objects.exists()


def test_a_decider_slower_than_its_timeout_refuses(
    api: ApiCall, hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    hooks(gate(receiver, "/gate", timeout_ms=200))
    released = receiver.hold("/gate")
    status, body = api("post", "/api/v1/messages", SEND)
    assert (status, body["detail"]) == (
        403,
        _refused("send", "webhook 'gate' timed out after 200 ms"),
    )
    assert not released.is_set()  # it refused while the hook still had not answered
    assert not Message.objects.exists()


def test_a_redirect_is_not_followed_and_refuses(
    api: ApiCall, hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    hooks(gate(receiver, "/gate"))
    receiver.statuses["/gate"] = 302
    status, body = api("post", "/api/v1/messages", SEND)
    assert (status, body["detail"]) == (403, _refused("send", "webhook 'gate' answered HTTP 302"))


def test_deciders_run_in_order_and_the_first_refusal_stops_the_rest(
    api: ApiCall, hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    hooks(gate(receiver, "/first"), gate(receiver, "/second"), gate(receiver, "/third"))
    receiver.statuses["/second"] = 503
    status, body = api("post", "/api/v1/messages", SEND)
    assert (status, body["detail"]) == (
        403,
        _refused("send", "webhook 'second' answered HTTP 503"),
    )
    # Deciders are called synchronously: everything they got has arrived by now.
    assert [receiver.next().path, receiver.next().path] == ["/first", "/second"]
    receiver.assert_no_more()
    assert not Message.objects.exists()


@pytest.mark.parametrize("verb", ["pop", "cancel"])
def test_pop_and_cancel_deciders_refuse_with_their_text_and_change_nothing(
    hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project, verb: str
) -> None:
    message = send()
    hooks(gate(receiver, "/gate", f"message_{verb}"))
    receiver.statuses["/gate"] = 500
    scope = B if verb == "pop" else A
    with pytest.raises(AdmissionRefused) as refused:
        pop_b() if verb == "pop" else cancel_a()
    assert refused.value.message == _refused(verb, "webhook 'gate' answered HTTP 500")
    ctx = receiver.next().payload["ctx"]
    assert (ctx["op"], ctx["workspace"], ctx["project"]) == (
        f"message_{verb}",
        scope["workspace"],
        scope["project"],
    )
    message.refresh_from_db()
    assert message.state == Message.State.PENDING
    assert not Activity.objects.filter(
        kind__in=[Activity.Kind.MESSAGE_CLAIMED, Activity.Kind.MESSAGE_CANCELLED]
    ).exists()


def test_a_send_decider_does_not_gate_pop_or_cancel(
    hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    send()
    send()
    hooks(gate(receiver, "/gate", "message_send"))
    receiver.statuses["/gate"] = 500
    assert pop_b() is not None
    assert cancel_a() == 1
    receiver.assert_no_more()


def test_a_refused_mcp_send_is_an_error_tool_result(
    client: Client, hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    hooks(gate(receiver, "/gate"))
    receiver.statuses["/gate"] = 500
    text = RawMcp(client=client, era="handshake").tool_error("memory_message_send", SEND)
    assert text == _refused("send", "webhook 'gate' answered HTTP 500")
    assert not Message.objects.exists()


# Observers -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_observer_gets_scope_and_actor_after_the_commit_and_nothing_of_the_message(
    api: ApiCall,
    hooks: Hooks,
    receiver: Receiver,
    alice: Persona,
    project_a: Project,
    project_b: Project,
) -> None:
    hooks(observer(receiver, "/watch"))
    receiver.count_messages = True
    status, body = api("post", "/api/v1/messages", SEND, token=alice.token)
    assert status == 201, body

    delivery = receiver.next()
    assert delivery.path == "/watch"
    assert delivery.payload == {
        "page": {"path": "", "frontmatter": {}, "body": ""},
        "ctx": {
            "workspace": "default",
            "project": "project-b",
            "actor": {
                "agent": "other",
                "user": "alice",
                "sub": None,
                "client": None,
                "session_id": None,
            },
            "op": "message_send",
        },
    }
    assert delivery.headers["X-Memory-Op"] == "message_send"
    assert delivery.headers["Content-Type"] == "application/json"
    assert delivery.visible_messages == 1  # read from the receiver's thread: committed first
    for private in ("secret-body-xyz", "secret-subject-xyz", body["message_id"]):
        assert private not in delivery.raw


@pytest.mark.django_db(transaction=True)
def test_a_held_observer_does_not_delay_the_response(
    api: ApiCall, hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    hooks(observer(receiver, "/slow", "message_send", timeout_ms=30_000))
    released = receiver.hold("/slow")
    status, body = api("post", "/api/v1/messages", SEND)
    # The response is here while the observer still waits for the Event only this test sets.
    assert status == 201, body
    assert receiver.next().path == "/slow"
    assert not released.is_set()
    released.set()


@pytest.mark.django_db(transaction=True)
def test_pop_and_cancel_observers_get_the_callers_scope_and_session(
    hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    send()
    send()
    hooks(observer(receiver, "/watch", "message_pop", "message_cancel"))
    started = session_start(
        principal=ANON, workspace="default", project="project-b", session_id="s-1", agent="codex"
    )
    assert pop_b(started.session) is not None
    popped = receiver.next()
    assert popped.headers["X-Memory-Op"] == "message_pop"
    assert popped.payload["ctx"] == {
        **B,
        "actor": {
            "agent": "codex",
            "user": None,
            "sub": None,
            "client": None,
            "session_id": "s-1",
        },
        "op": "message_pop",
    }
    assert cancel_a() == 1
    cancelled = receiver.next()
    assert cancelled.headers["X-Memory-Op"] == "message_cancel"
    assert cancelled.payload["ctx"]["op"] == "message_cancel"
    assert (cancelled.payload["ctx"]["workspace"], cancelled.payload["ctx"]["project"]) == (
        "default",
        "project-a",
    )


# A "no call" is shown by a later operation the same observer does hear about: it must be
# the first delivery, and the only one.


@pytest.mark.django_db(transaction=True)
def test_a_send_refused_by_a_full_inbox_is_not_observed(
    api: ApiCall, hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    Message.objects.bulk_create(
        Message(to_project=project_b, from_project=project_a, body="x") for _ in range(256)
    )
    hooks(observer(receiver, "/watch"))
    status, body = api("post", "/api/v1/messages", SEND)
    assert (status, body["code"]) == (409, "inbox_full")
    assert pop_b() is not None
    assert receiver.next().payload["ctx"]["op"] == "message_pop"
    receiver.assert_no_more()


@pytest.mark.django_db(transaction=True)
def test_a_pop_that_claims_nothing_is_not_observed(
    hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    hooks(observer(receiver, "/watch"))
    assert pop_b() is None
    send()
    assert receiver.next().payload["ctx"]["op"] == "message_send"
    receiver.assert_no_more()


@pytest.mark.django_db(transaction=True)
def test_a_cancel_of_nothing_is_not_observed(
    hooks: Hooks, receiver: Receiver, project_a: Project, project_b: Project
) -> None:
    hooks(observer(receiver, "/watch"))
    assert cancel_a() == 0
    send()
    assert receiver.next().payload["ctx"]["op"] == "message_send"
    receiver.assert_no_more()


@pytest.mark.django_db(transaction=True)
def test_a_failing_observer_is_logged_and_ignored(
    api: ApiCall,
    hooks: Hooks,
    receiver: Receiver,
    admission_log: queue.Queue[logging.LogRecord],
    project_a: Project,
    project_b: Project,
) -> None:
    hooks(observer(receiver, "/watch", blocking=False, failure_policy="reject"))
    receiver.statuses["/watch"] = 500
    status, body = api("post", "/api/v1/messages", SEND)
    assert status == 201, body
    assert receiver.next().path == "/watch"
    record = admission_log.get(timeout=WAIT_SECONDS)
    assert record.levelno == logging.WARNING
    assert "answered HTTP 500" in record.getMessage()
    assert Message.objects.count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("blocking", "level"), [(True, logging.ERROR), (False, logging.WARNING)])
def test_observers_beyond_the_in_flight_bound_are_dropped_and_logged(
    api: ApiCall,
    hooks: Hooks,
    receiver: Receiver,
    admission_log: queue.Queue[logging.LogRecord],
    monkeypatch: pytest.MonkeyPatch,
    project_a: Project,
    project_b: Project,
    blocking: bool,
    level: int,
) -> None:
    # One slot instead of 256: the same code path, without holding 256 connections open.
    monkeypatch.setattr(admission, "_in_flight", threading.BoundedSemaphore(1))
    hooks(observer(receiver, "/slow", "message_send", blocking=blocking))
    released = receiver.hold("/slow")
    assert api("post", "/api/v1/messages", SEND)[0] == 201
    assert receiver.next().path == "/slow"  # holds the only slot now
    assert api("post", "/api/v1/messages", SEND)[0] == 201  # observed by nobody: dropped
    record = admission_log.get_nowait()  # logged by the request itself, before it answered
    assert record.levelno == level
    assert record.getMessage() == (
        "admission observer 'slow' dropped for message_send: 256 deliveries already in flight"
    )
    released.set()
    receiver.assert_no_more()
    assert Message.objects.count() == 2


# No hooks, no cost ---------------------------------------------------------------------


def test_without_hooks_an_operation_registers_nothing_and_runs_no_extra_query(
    hooks: Hooks,
    receiver: Receiver,
    project_a: Project,
    project_b: Project,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with CaptureQueriesContext(connection) as plain, django_capture_on_commit_callbacks() as none:
        send()
    assert none == []

    hooks(gate(receiver, "/gate"), observer(receiver, "/watch", "message_send"))
    with CaptureQueriesContext(connection) as hooked, django_capture_on_commit_callbacks() as one:
        send()
    assert len(one) == 1  # the observer's delivery, waiting for the commit
    assert len(hooked) == len(plain)  # admission itself reads nothing from the database
