from django.apps import AppConfig


class WebuiConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "webui"
    verbose_name = "Web mailbox"
