"""The web mailbox under ``/web/``: read-only pages, the decision answer page and the
answer links."""

from __future__ import annotations

from django.urls import path

from webui import decision_views, link_views, views

app_name = "webui"

urlpatterns = [
    path("web/", views.home, name="home"),
    # The live regions of the home and project pages, which static/webui/live.js polls.
    path("web/live/", views.home_live, name="live-home"),
    # A URL that names no project is still a project page: it shows an empty mailbox.
    path("web/w/", views.project_detail, name="no-project"),
    path("web/w/<str:workspace>/", views.project_detail, name="workspace"),
    path("web/w/<str:workspace>/<str:project>/", views.project_detail, name="project"),
    path("web/w/<str:workspace>/<str:project>/live/", views.project_live, name="live-project"),
    path(
        "web/w/<str:workspace>/<str:project>/pages/<path:path>",
        views.page_detail,
        name="page",
    ),
    # A message with its thread: read-only, like every page above.
    path(
        "web/w/<str:workspace>/<str:project>/messages/<uuid:message_id>/",
        views.message_detail,
        name="message",
    ),
    # The one page whose form writes: it sends a decision-reply, never pops or cancels.
    path(
        "web/w/<str:workspace>/<str:project>/decisions/<uuid:question_id>/",
        decision_views.decision_detail,
        name="decision",
    ),
    # An answer link of a notification: GET shows it, only a POST answers.
    path("web/a/<str:token>/", link_views.answer_link, name="answer-link"),
]
