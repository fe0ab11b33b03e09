"""Django admin: where admins manage users' tokens, grants, projects and sessions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from projects.models import Activity, AgentSession, ApiToken, Grant, Project, Workspace
from projects.services import api_token_issue, api_token_revoke


class GrantInline(admin.TabularInline[Grant, Project]):
    model = Grant
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin[Workspace]):
    list_display = ["name", "created_at"]
    search_fields = ["name"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin[Project]):
    list_display = ["name", "workspace", "access_mode", "created_by", "created_at"]
    list_filter = ["access_mode", "workspace"]
    list_select_related = ["workspace", "created_by"]
    search_fields = ["name", "workspace__name"]
    inlines = [GrantInline]


@admin.register(Grant)
class GrantAdmin(admin.ModelAdmin[Grant]):
    list_display = ["user", "project", "level", "created_at"]
    list_filter = ["level"]
    list_select_related = ["user", "project__workspace"]
    autocomplete_fields = ["user", "project"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    list_display = ["prefix", "name", "user", "created_at", "last_used_at", "revoked_at"]
    list_select_related = ["user"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]
    autocomplete_fields = ["user"]

    def has_change_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        # A token is issued and revoked, never edited: its key cannot be shown again.
        return obj is None and super().has_change_permission(request, obj)

    def save_model(
        self, request: HttpRequest, obj: ApiToken, form: ModelForm[Any], change: bool
    ) -> None:
        token, key = api_token_issue(user=obj.user, name=obj.name)
        obj.pk = token.pk
        obj.key_hash, obj.prefix, obj.created_at = token.key_hash, token.prefix, token.created_at
        # Shown once on the next page. Messages are kept in the session (MESSAGE_STORAGE),
        # server-side: the default cookie storage would hand the key to the browser's
        # cookie store. Reading the message deletes it.
        messages.warning(
            request, f"New token for {obj.user}: {key} — copy it now, it is never shown again."
        )

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            api_token_revoke(token=token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).")


@admin.register(AgentSession)
class AgentSessionAdmin(admin.ModelAdmin[AgentSession]):
    list_display = ["session_id", "project", "agent", "started_at", "last_seen_at"]
    list_select_related = ["project__workspace"]
    search_fields = ["session_id"]
    readonly_fields = ["session_id", "project", "agent", "started_at", "last_seen_at"]


@admin.register(Activity)
class ActivityAdmin(admin.ModelAdmin[Activity]):
    list_display = ["created_at", "project", "kind", "actor", "summary"]
    list_filter = ["kind"]
    list_select_related = ["project__workspace"]
    readonly_fields = ["project", "kind", "actor", "summary", "counterpart", "created_at"]
