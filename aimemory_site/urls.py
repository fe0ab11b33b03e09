from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from aimemory_site.api import api, hooks_api
from aimemory_site.mcp.views import mcp_endpoint, well_known_not_found
from aimemory_site.views import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("mcp", mcp_endpoint, name="mcp"),
    path("mcp/", mcp_endpoint),
    path(".well-known/<path:rest>", well_known_not_found),
    path("api/v1/", api.urls),
    path("", RedirectView.as_view(url="/web/"), name="root"),
    path("", hooks_api.urls),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("webui.urls")),
]

handler400 = "aimemory_site.errors_views.bad_request"
handler403 = "aimemory_site.errors_views.permission_denied"
handler404 = "aimemory_site.errors_views.page_not_found"
handler500 = "aimemory_site.errors_views.server_error"
