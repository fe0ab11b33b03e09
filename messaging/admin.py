"""Messages in Django admin: read-only audit rows (states change only through services);
notification targets, their URLs masked once saved, and the delivery log; wake webhooks,
their secrets never shown once saved."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from messaging.models import Message, NotificationDelivery, NotificationTarget, WakeWebhook
from messaging.notifications import notify_url_masked, notify_url_refusal
from messaging.wake_webhooks import (
    wake_secret_for,
    wake_token_refusal,
    wake_url_refusal,
    wake_url_shown,
    wake_webhook_enabled_again,
)


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


class WakeWebhookForm(forms.ModelForm[WakeWebhook]):
    """A webhook's URL must be one the server calls (docs/reference.md#wake-webhooks); its
    secret is typed once (a routine's bearer token) or made by the server (generic)."""

    class Meta:
        model = WakeWebhook
        fields = ["project", "url", "dialect", "secret", "enabled"]
        widgets = {"secret": forms.PasswordInput(render_value=False)}
        help_texts = {
            "url": "https://, or http:// on loopback with AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS=1.",
            "secret": "claude-routine: the routine's bearer token. generic: leave empty, and "
            "the server makes the signing secret and shows it once.",
        }

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["secret"].required = False

    def clean_url(self) -> str:
        url = str(self.cleaned_data["url"]).strip()
        refusal = wake_url_refusal(url)
        if refusal is not None:
            raise forms.ValidationError(refusal)
        return url

    def clean(self) -> dict[str, object]:
        cleaned = super().clean() or {}
        secret = str(cleaned.get("secret") or "").strip()
        refusal = wake_token_refusal(str(cleaned.get("dialect") or ""), secret)
        if refusal is not None:
            self.add_error("secret", refusal)
        cleaned["secret"] = secret
        return cleaned


@admin.register(WakeWebhook)
class WakeWebhookAdmin(admin.ModelAdmin[WakeWebhook]):
    list_display = [
        "id",
        "project",
        "dialect",
        "shown_url",
        "enabled",
        "failures",
        "last_sent_at",
        "disabled_reason",
    ]
    list_filter = ["enabled", "dialect"]
    list_select_related = ["project__workspace"]
    search_fields = ["project__name", "project__workspace__name"]
    _STATE = ["failures", "disabled_reason", "last_error", "last_attempt_at", "last_sent_at"]

    def get_form(  # type: ignore[override]  # django-stubs: the form class is generic
        self, request: HttpRequest, obj: WakeWebhook | None = None, **kwargs: object
    ) -> type[forms.ModelForm[WakeWebhook]]:
        if obj is None:
            kwargs["form"] = WakeWebhookForm
        return super().get_form(request, obj, **kwargs)  # type: ignore[arg-type]

    @admin.display(description="URL (credentials hidden)")
    def shown_url(self, obj: WakeWebhook) -> str:
        return wake_url_shown(obj.url)

    def get_fields(  # type: ignore[override]  # django-stubs: fields may also be groups
        self, request: HttpRequest, obj: WakeWebhook | None = None
    ) -> list[str]:
        if obj is None:
            return ["project", "url", "dialect", "secret", "enabled"]
        # Saved: the secret is never shown again; replace the webhook to change it.
        return ["project", "shown_url", "dialect", "enabled", *self._STATE]

    def get_readonly_fields(
        self, request: HttpRequest, obj: WakeWebhook | None = None
    ) -> list[str]:
        if obj is None:
            return []
        return ["project", "shown_url", "dialect", *self._STATE]

    def save_model(
        self,
        request: HttpRequest,
        obj: WakeWebhook,
        form: forms.ModelForm[WakeWebhook],
        change: bool,
    ) -> None:
        made = None
        if not change:
            obj.secret = wake_secret_for(obj.dialect, obj.secret)
            made = obj.secret if obj.dialect == WakeWebhook.Dialect.GENERIC else None
        if change and "enabled" in form.changed_data and obj.enabled:
            wake_webhook_enabled_again(obj)
        super().save_model(request, obj, form, change)
        if made is not None:
            self.message_user(
                request,
                f"The webhook's signing secret, shown only this once: {made}",
                level=messages.WARNING,
            )
