from django.apps import AppConfig
from django.db.models.signals import post_migrate


class RetrievalConfig(AppConfig):
    name = "retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from retrieval import panels, schema  # noqa: F401  schema registers its serializer extensions with drf-spectacular
        from retrieval.tasks import ensure_purge_schedule

        panels.register()  # the mentions and links discovery follows, on catalog's source page
        post_migrate.connect(ensure_purge_schedule, sender=self, dispatch_uid="lectern-purge-traces-schedule")
