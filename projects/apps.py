from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "projects"
    verbose_name = "Projects and access"

    def ready(self) -> None:
        from projects import checks  # noqa: F401  (registers the system checks)
