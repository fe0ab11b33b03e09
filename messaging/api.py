"""JSON API routes for messages: thin adapters over the messaging services."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import Query, Router

from aimemory_site.lib.api import UuidText, errors, principal_of, wait_said
from aimemory_site.lib.errors import BadRequest, Code
from aimemory_site.lib.wakeups import CLIENT_GONE
from messaging import services
from messaging.payloads import (
    message_head_payload,
    message_payload,
    pop_payload,
    search_hit_payload,
    send_payload,
    status_payload,
)
from messaging.schemas import (
    MessageCancelIn,
    MessageCancelOut,
    MessageListOut,
    MessageListQuery,
    MessagePopIn,
    MessagePopOut,
    MessageSearchOut,
    MessageSearchQuery,
    MessageSendIn,
    MessageSendOut,
    MessageStatusOut,
    MessageStatusQuery,
    MessageThreadOut,
    MessageThreadQuery,
)
from messaging.search import message_search, message_thread
from messaging.selectors import message_list, message_status, names_shown

router = Router(tags=["messages"])


@router.post(
    "/messages", response={201: MessageSendOut, 200: MessageSendOut, **errors(404, 409, body=True)}
)
def messages_send(request: HttpRequest, payload: MessageSendIn) -> HttpResponse:
    """Send a message to another project's inbox (needs write on both projects).

    201 for a new message; 200 when ``idempotency_key`` replays an earlier send.
    """
    sent = services.message_send(
        principal=principal_of(request, access_confirms=True),
        to_workspace=payload.to_workspace,
        to_project=payload.to_project,
        from_workspace=payload.from_workspace,
        from_project=payload.from_project,
        subject=payload.subject,
        body=payload.body,
        in_reply_to=payload.in_reply_to,
        idempotency_key=payload.idempotency_key,
        expires_in_seconds=payload.expires_in_seconds,
    )
    return JsonResponse(send_payload(sent), status=200 if sent.replay else 201)


@router.get("/messages", response={200: MessageListOut, **errors(404)})
def messages_list(request: HttpRequest, query: Query[MessageListQuery]) -> HttpResponse:
    """List pending messages, oldest first, without claiming them (limit clamped to 1..200)."""
    principal = principal_of(request, access_confirms=True)
    messages = message_list(
        principal=principal,
        workspace=query.workspace,
        project=query.project,
        box=query.box,
        limit=query.limit,
    )
    # The payload is built by the one serializer every surface shares; re-validating up to
    # 200 of them against the schema would cost a fifth of the request.
    shown = names_shown(principal, messages)
    return JsonResponse({"messages": [message_payload(m, shown) for m in messages]})


@router.post("/messages/pop", response={200: MessagePopOut, **errors(404, body=True)})
def messages_pop(request: HttpRequest, payload: MessagePopIn) -> HttpResponse:
    """Claim the oldest pending inbox message (or the named one) exactly once.

    Answers exactly ``{"message": null}`` when nothing was claimed. With ``wait_seconds``
    it waits for a message to claim first (docs/reference.md#waiting-and-waking); the
    header ``X-Memory-Wait-Seconds`` says the wait used, clamped to 0..60.
    """
    principal = principal_of(request, access_confirms=True)
    claimed = services.message_pop(
        principal=principal,
        workspace=payload.workspace,
        project=payload.project,
        message_id=payload.message_id,
        request_id=payload.request_id,
        wait_seconds=payload.wait_seconds,
        in_reply_to=payload.in_reply_to,
        client_gone=request.META.get(CLIENT_GONE),
    )
    # A JsonResponse, not the schema: the empty answer must not grow a null notice key.
    shown = names_shown(principal, [claimed] if claimed else [])
    return wait_said(JsonResponse(pop_payload(claimed, shown)), payload.wait_seconds)


@router.post("/messages/cancel", response={200: MessageCancelOut, **errors(404, body=True)})
def messages_cancel(request: HttpRequest, payload: MessageCancelIn) -> dict[str, int]:
    """Cancel pending messages this project sent: exactly one of ``message_id`` or ``all``."""
    if (payload.message_id is None) == (not payload.all):
        raise BadRequest(
            "cancel needs exactly one of message_id or all: true", code=Code.CANCEL_TARGET
        )
    cancelled = services.message_cancel(
        principal=principal_of(request),
        workspace=payload.workspace,
        project=payload.project,
        message_id=payload.message_id,
    )
    return {"cancelled": cancelled}


# Declared before /messages/{message_id}: Django tries the routes in this order, and the
# status route's {message_id} would take "search" too (and answer invalid_message_id).
@router.get("/messages/search", response={200: MessageSearchOut, **errors(404)})
def messages_search(request: HttpRequest, query: Query[MessageSearchQuery]) -> HttpResponse:
    """Full-text search over the subjects and bodies of the project's mail, in every state
    still stored, best match first, then newest; each hit without its body, with a snippet.

    Never claims and never changes state (docs/reference.md#search-and-threads).
    """
    principal = principal_of(request)
    hits = message_search(
        principal,
        workspace=query.workspace,
        project=query.project,
        query=query.q,
        box=query.box,
        limit=query.limit,
    )
    shown = names_shown(principal, [hit.message for hit in hits])
    return JsonResponse({"messages": [search_hit_payload(hit, shown) for hit in hits]})


@router.get("/messages/{message_id}/thread", response={200: MessageThreadOut, **errors(404)})
def messages_thread(
    request: HttpRequest, message_id: UuidText, query: Query[MessageThreadQuery]
) -> HttpResponse:
    """The ``in_reply_to`` chain the message belongs to, from its start, oldest first, each
    without its body; only messages the project sent or received."""
    principal = principal_of(request)
    messages = message_thread(
        principal,
        workspace=query.workspace,
        project=query.project,
        message_id=message_id,
    )
    shown = names_shown(principal, messages)
    return JsonResponse({"messages": [message_head_payload(m, shown) for m in messages]})


@router.get("/messages/{message_id}", response={200: MessageStatusOut, **errors(404)})
def messages_status(
    request: HttpRequest, message_id: UuidText, query: Query[MessageStatusQuery]
) -> HttpResponse:
    """A message's delivery state, without its body, for its sender or recipient project.

    With ``wait_seconds`` a pending message is waited on until it is claimed or cancelled;
    the header ``X-Memory-Wait-Seconds`` says the wait used, clamped to 0..60.
    """
    principal = principal_of(request)
    message = message_status(
        principal=principal,
        workspace=query.workspace,
        project=query.project,
        message_id=message_id,
        wait_seconds=query.wait_seconds,
        client_gone=request.META.get(CLIENT_GONE),
    )
    shown = names_shown(principal, [message])
    return wait_said(JsonResponse(status_payload(message, shown)), query.wait_seconds)
