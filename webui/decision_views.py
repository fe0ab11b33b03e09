"""The decision answer page, ``/web/w/<ws>/<proj>/decisions/<id>/`` (docs/reference.md#operator-decisions).

The one web page that writes: an answer is a new ``decision-reply:`` message sent by
``messaging.answer_services.decision_answer``, never a pop or a cancel of the question, so the
claim-once queue stays out of a browser's reach. CSRF-protected like any Django form.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from aimemory_site.lib.errors import AppError, NotFound
from aimemory_site.lib.principal import Principal
from messaging.answer_selectors import DecisionPage, decision_page
from messaging.answer_services import decision_answer
from webui.selectors import ProjectName
from webui.views import viewer_of

_SAFE_SCHEMES = frozenset({"http", "https"})


@dataclass(frozen=True)
class LinkView:
    """A link from the question: ``href`` only for a well-formed http(s) URL, else the
    text is shown as it is (a ``javascript:`` link is never made clickable)."""

    text: str
    href: str | None


def link_view(text: str) -> LinkView:
    try:
        parts = urlsplit(text)
    except ValueError:
        return LinkView(text=text, href=None)
    safe = (
        parts.scheme.lower() in _SAFE_SCHEMES
        and bool(parts.netloc)
        and not any(char.isspace() or ord(char) < 0x20 for char in text)
    )
    return LinkView(text=text, href=text if safe else None)


def _page_url(workspace: str, project: str, question_id: uuid.UUID) -> str:
    return reverse("webui:decision", args=[workspace, project, question_id])


def _uuid_or_none(value: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(value) if value else None
    except ValueError:
        return None


@require_http_methods(["GET", "POST"])
def decision_detail(
    request: HttpRequest, workspace: str, project: str, question_id: uuid.UUID
) -> HttpResponse:
    """GET shows the question and, when the viewer may answer, the form; POST answers.

    A mailbox the viewer may not read and an id that names no question in it are the same
    404, which shows nothing. An answer that succeeds redirects to the page with
    ``?answered=<reply id>``, which shows ``answered: <option>`` and the reply's id.
    """
    viewer = viewer_of(request)
    if viewer is None:
        return redirect_to_login(request.get_full_path())
    if request.method == "POST":
        return _answer(request, viewer, workspace, project, question_id)
    answered_id = _uuid_or_none(request.GET.get("answered"))
    found = decision_page(viewer, workspace, project, question_id, answered_id=answered_id)
    if found is None:
        raise Http404
    return _render(request, found, workspace, project, question_id)


def _answer(
    request: HttpRequest,
    viewer: Principal,
    workspace: str,
    project: str,
    question_id: uuid.UUID,
) -> HttpResponse:
    option = request.POST.get("option", "")
    comment = request.POST.get("comment", "")
    try:
        sent = decision_answer(
            principal=viewer,
            workspace=workspace,
            project=project,
            question_id=question_id,
            option=option,
            comment=comment,
            again=request.POST.get("again") == "1",
            idempotency_key=request.POST.get("answer_key") or None,
        )
    except NotFound:
        raise Http404 from None  # the mailbox: unreadable answers like missing
    except AppError as error:
        found = decision_page(viewer, workspace, project, question_id)
        return _render(
            request,
            found,
            workspace,
            project,
            question_id,
            error=error,
            chosen=option,
            comment=comment,
        )
    # See Other: the browser follows with a GET, so a reload does not answer again.
    response = HttpResponseRedirect(
        f"{_page_url(workspace, project, question_id)}?answered={sent.message.pk}"
    )
    response.status_code = 303
    return response


def _render(
    request: HttpRequest,
    found: DecisionPage | None,
    workspace: str,
    project: str,
    question_id: uuid.UUID,
    *,
    error: AppError | None = None,
    chosen: str = "",
    comment: str = "",
) -> HttpResponse:
    """The page, or, when the question cannot be shown (it is no longer pending, or the
    id names no question), only the error; with the error's status when there is one."""
    context: dict[str, Any] = {
        "page": found,
        "mailbox_name": ProjectName(workspace=workspace, project=project),
        "question_id": question_id,
        "error": error,
        "chosen": chosen,
        "comment": comment,
        # One key per rendered form: a double submit is one answer (messaging.answer_services).
        "answer_key": secrets.token_urlsafe(16),
    }
    if found is not None:
        question = found.question
        sender = question.from_project
        context.update(
            decision=found.decision,
            links=[link_view(link) for link in found.decision["links"]],
            sender=ProjectName(workspace=sender.workspace.name, project=sender.name)
            if found.sender_readable
            else None,
            reply_project=found.decision["reply_project"],
        )
    status = error.http_status if error is not None else 200
    return render(request, "webui/decision.html", context, status=status)
