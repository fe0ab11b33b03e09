"""The read-only web mailbox under ``/web/``."""

from __future__ import annotations

from django.urls import path

from webui import views

app_name = "webui"

urlpatterns = [
    path("web/", views.home, name="home"),
    # A URL that names no project is still a project page: it shows an empty mailbox.
    path("web/w/", views.project_detail, name="no-project"),
    path("web/w/<str:workspace>/", views.project_detail, name="workspace"),
    path("web/w/<str:workspace>/<str:project>/", views.project_detail, name="project"),
    path(
        "web/w/<str:workspace>/<str:project>/pages/<path:path>",
        views.page_detail,
        name="page",
    ),
]
