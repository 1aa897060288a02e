from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from retrieval import schema  # noqa: F401  registers the bearer scheme with drf-spectacular
