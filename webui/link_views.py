"""Answer links, ``/web/a/<token>/`` (docs/reference.md#answer-links): one question, one
option and one user, as a notification carries them.

GET never answers (link scanners and previews follow GETs): it shows the question, the
option the link chooses, a comment box and a **Send answer** button. The POST,
CSRF-protected, sends the answer as the link's user through
``messaging.answer_services.decision_answer`` with ``via`` ``link``, exactly as the answer
page does. For a question that does not require root the token is the credential; for
one that does, the person signs in as the link's user first. Whoever is signed in as
another user gets 403 and nothing is sent: a link answers only as its own user, and a page
that answered for someone other than who is signed in would surprise.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from aimemory_site.lib.decisions import DecisionOption
from aimemory_site.lib.errors import AppError
from aimemory_site.lib.principal import Principal
from messaging.answer_links import AnswerLink, answer_link_read
from messaging.answer_selectors import AnswerLinkPage, answer_link_page, question_deadline
from messaging.answer_services import decision_answer
from webui.selectors import ProjectName

# Why the page shows no form although the link may send.
OTHER_USER = "other-user"  # signed in as someone else: 403
SIGN_IN = "sign-in"  # a requires_root question, and nobody is signed in


@require_http_methods(["GET", "POST"])
def answer_link(request: HttpRequest, token: str) -> HttpResponse:
    """GET shows the link's question and option; POST sends the answer, then redirects to
    the GET, which shows ``answered: <option id>``.

    A tampered, expired or unknown token, and every token on an anonymous server, is the
    site's 404 page. A link that may no longer send (answered, closed, the user lost the
    right to answer) shows why and sends nothing.
    """
    link = answer_link_read(token)
    found = answer_link_page(link.question_id, link.user_id) if link is not None else None
    if link is None or found is None:
        raise Http404
    option = _option_of(found, link)
    signed_in = _signed_in_user(request)
    if signed_in is not None and signed_in.pk != found.user.pk:
        return _render(request, found, option, blocked=OTHER_USER, status=403)
    blocked = SIGN_IN if found.decision["requires_root"] and signed_in is None else None
    if request.method != "POST":
        return _render(request, found, option, blocked=blocked)
    if blocked is not None:
        return _render(request, found, option, blocked=blocked, status=403)
    if not found.may_send:
        return _render(request, found, option, status=409)
    return _send(request, found, link, option)


def _option_of(found: AnswerLinkPage, link: AnswerLink) -> DecisionOption:
    """The option the link chooses. A question's options never change, and a link is
    made only for one it offers; a token naming another is as unknown as a forged one."""
    for option in found.decision["options"]:
        if option["id"] == link.option_id:
            return option
    raise Http404


def _signed_in_user(request: HttpRequest) -> User | None:
    user = request.user
    return user if isinstance(user, User) and user.is_authenticated else None


def _send(
    request: HttpRequest, found: AnswerLinkPage, link: AnswerLink, option: DecisionOption
) -> HttpResponse:
    comment = request.POST.get("comment", "")
    mailbox = found.question.to_project
    try:
        decision_answer(
            principal=Principal.for_user(found.user),
            workspace=mailbox.workspace.name,
            project=mailbox.name,
            question_id=found.question.pk,
            option=link.option_id,
            comment=comment,
            # Derived from the token: two POSTs of one link are one answer.
            idempotency_key=link.idempotency_key,
            via="link",
        )
    except AppError as error:
        # Answered or closed meanwhile (another answer won the race): the page says so.
        # Otherwise the reason, with the form and the comment as typed.
        now = answer_link_page(link.question_id, link.user_id)
        if now is None:
            raise Http404 from None
        if not now.may_send:
            return _render(request, now, option, status=409)
        return _render(request, now, option, error=error, comment=comment, status=error.http_status)
    # See Other: the browser follows with a GET, so a reload sends nothing.
    response = HttpResponseRedirect(request.path)
    response.status_code = 303
    return response


def _render(
    request: HttpRequest,
    found: AnswerLinkPage,
    option: DecisionOption,
    *,
    blocked: str | None = None,
    error: AppError | None = None,
    comment: str = "",
    status: int = 200,
) -> HttpResponse:
    question = found.question
    mailbox, asker = question.to_project, question.from_project
    context: dict[str, Any] = {
        "found": found,
        "option": option,
        "blocked": blocked,
        "error": error,
        "comment": comment,
        "mailbox_name": ProjectName(workspace=mailbox.workspace.name, project=mailbox.name),
        "asker_name": ProjectName(workspace=asker.workspace.name, project=asker.name),
        "deadline": question_deadline(question),
    }
    return render(request, "webui/answer_link.html", context, status=status)
