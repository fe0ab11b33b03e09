"""The web mailbox's pages: GET-only, access and selectors, then a template.

Nothing here changes a message: consuming one stays an agent action (memory_message_pop),
and neither the project page's search nor a message's page pops, cancels or answers.
The web's only writes are a person's answers to the questions put to them
(``decision_views``, ``link_views``), which send a reply as the answer page says.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from functools import wraps
from typing import Concatenate, ParamSpec

from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.cache import add_never_cache_headers, get_conditional_response
from django.utils.http import quote_etag
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from aimemory_site.lib.principal import Principal
from projects.auth import auth_enabled
from webui.selectors import (
    home_inbox,
    home_page,
    message_page,
    page_view,
    project_live_regions,
    project_page,
)

P = ParamSpec("P")
ViewerView = Callable[Concatenate[HttpRequest, Principal, P], HttpResponse]
View = Callable[Concatenate[HttpRequest, P], HttpResponse]


def viewer_of(request: HttpRequest) -> Principal | None:
    """Who looks at a web page: with authentication on, the signed-in Django user (None
    for anyone else, who must sign in); on an anonymous server, the anonymous principal,
    who sees everything without a login."""
    if not auth_enabled():
        return Principal.anonymous()
    user = request.user
    if not isinstance(user, User) or not user.is_authenticated:
        return None
    return Principal.for_user(user)


def viewer_page(view: ViewerView[P]) -> View[P]:
    """Make ``view`` a read-only page that receives the viewer (``viewer_of``) as a
    Principal; anyone who must sign in is sent to the login page."""

    @wraps(view)
    def page(request: HttpRequest, /, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
        viewer = viewer_of(request)
        if viewer is None:
            return redirect_to_login(request.get_full_path())
        return view(request, viewer, *args, **kwargs)

    # GET only, and exempt from CSRF so that a POST gets the honest 405 instead of a
    # CSRF 403: the page accepts no unsafe method, so there is nothing to forge.
    return csrf_exempt(require_GET(page))


@viewer_page
def home(request: HttpRequest, viewer: Principal) -> HttpResponse:
    return render(request, "webui/home.html", {"page": home_page(viewer)})


@viewer_page
def project_detail(
    request: HttpRequest,
    viewer: Principal,
    workspace: str | None = None,
    project: str | None = None,
) -> HttpResponse:
    """A project's page; with ``?q=`` it also shows the search of the project's inbox and
    outbox (docs/operating.md#the-web-mailbox)."""
    query = request.GET.get("q", "")
    page = project_page(viewer, workspace, project, query)
    return render(request, "webui/project.html", {"page": page})


@viewer_page
def message_detail(
    request: HttpRequest, viewer: Principal, workspace: str, project: str, message_id: uuid.UUID
) -> HttpResponse:
    """One message of a project with its thread, read-only. A message the viewer may not
    see is the site's 404 page, as a missing one is."""
    found = message_page(viewer, workspace, project, message_id)
    if found is None:
        raise Http404
    return render(request, "webui/message.html", {"page": found})


@viewer_page
def page_detail(
    request: HttpRequest, viewer: Principal, workspace: str, project: str, path: str
) -> HttpResponse:
    """A project's page, its body rendered as Markdown; read-only. No page at the path and
    a project the viewer may not read give the same 404 page."""
    view = page_view(viewer, workspace, project, path)
    status = 200 if view.page is not None else 404
    return render(request, "webui/page.html", {"view": view}, status=status)


@viewer_page
def home_live(request: HttpRequest, viewer: Principal) -> HttpResponse:
    """The home page's badges and summary, as the page would render them now."""
    return _live_fragment(request, "webui/live_home.html", {"inbox": home_inbox(viewer)})


@viewer_page
def project_live(
    request: HttpRequest, viewer: Principal, workspace: str, project: str
) -> HttpResponse:
    """The project page's Mailbox and Recent Activity, as the page would render them now:
    the same empty ones for a project that does not exist and for one the viewer may not
    read."""
    live = project_live_regions(viewer, workspace, project)
    return _live_fragment(request, "webui/live_project.html", {"live": live})


def _live_fragment(request: HttpRequest, template: str, context: dict[str, object]) -> HttpResponse:
    """The live regions of a page (docs/operating.md#the-web-mailbox), for ``static/webui/live.js``.

    The ETag is a digest of the fragment itself, so it says no more than the fragment
    does, and a poll whose ``If-None-Match`` still matches gets a 304 with no body. Never
    cached: the regions are the viewer's and change with every message.
    """
    body = render_to_string(template, context, request=request)
    response = HttpResponse(body)
    response["ETag"] = quote_etag(hashlib.sha256(body.encode()).hexdigest()[:32])
    add_never_cache_headers(response)
    # Given a response, it answers that response or the 304.
    return get_conditional_response(request, etag=response["ETag"], response=response) or response
