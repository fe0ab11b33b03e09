"""Messages in Django admin: read-only audit rows (states change only through services);
notification targets, their URLs masked once saved, and the delivery log."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from messaging.models import Message, NotificationDelivery, NotificationTarget
from messaging.notifications import notify_url_masked, notify_url_refusal


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


class NotificationTargetForm(forms.ModelForm[NotificationTarget]):
    """A target's URL is typed once, when it is added; Apprise must parse it."""

    class Meta:
        model = NotificationTarget
        fields = ["user", "url", "label", "enabled"]
        widgets = {"url": forms.PasswordInput(render_value=False)}
        help_texts = {
            "url": "An Apprise URL: ntfy://topic, mailto://user:pass@host, tgram://bot/chat, "
            "json://host/path. It is a credential: it is shown masked once saved."
        }

    def clean_url(self) -> str:
        url = str(self.cleaned_data["url"])
        refusal = notify_url_refusal(url)
        if refusal is not None:
            raise forms.ValidationError(refusal)
        return url.strip()


@admin.register(NotificationTarget)
class NotificationTargetAdmin(admin.ModelAdmin[NotificationTarget]):
    form = NotificationTargetForm
    list_display = ["id", "user", "label", "masked_url", "enabled", "failures", "disabled_reason"]
    list_filter = ["enabled"]
    list_select_related = ["user"]
    search_fields = ["user__username", "label"]

    @admin.display(description="URL (masked)")
    def masked_url(self, obj: NotificationTarget) -> str:
        return notify_url_masked(obj.url)

    def get_fields(  # type: ignore[override]  # django-stubs: fields may also be groups
        self, request: HttpRequest, obj: NotificationTarget | None = None
    ) -> list[str]:
        if obj is None:
            return ["user", "url", "label", "enabled"]
        # Saved: the URL is never shown again, only masked; replace the target to change it.
        return ["user", "masked_url", "label", "enabled", "failures", "disabled_reason"]

    def get_readonly_fields(
        self, request: HttpRequest, obj: NotificationTarget | None = None
    ) -> list[str]:
        if obj is None:
            return []
        return ["user", "masked_url", "failures", "disabled_reason"]


@admin.register(NotificationDelivery)
class NotificationDeliveryAdmin(admin.ModelAdmin[NotificationDelivery]):
    """The delivery log: read-only, as the worker writes it."""

    list_display = ["id", "message", "event", "target", "state", "attempts", "sent_at"]
    list_filter = ["state", "event"]
    list_select_related = ["target__user"]
    readonly_fields = [
        "message",
        "target",
        "destination",
        "event",
        "state",
        "attempts",
        "last_error",
        "created_at",
        "claimed_at",
        "sent_at",
    ]
    fields = tuple(readonly_fields)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: NotificationDelivery | None = None
    ) -> bool:
        return False
