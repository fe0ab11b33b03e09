"""Messages in Django admin: read-only audit rows (states change only through services)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from messaging.models import Message


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin[Message]):
    list_display = ["id", "state", "from_project", "to_project", "subject", "created_at"]
    list_filter = ["state"]
    list_select_related = ["from_project__workspace", "to_project__workspace"]
    search_fields = ["id", "subject"]
    readonly_fields = [f.name for f in Message._meta.get_fields() if f.concrete]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Message | None = None) -> bool:
        return False
