from django.apps import AppConfig
from django.db.models.signals import post_migrate


class CatalogConfig(AppConfig):
    name = "catalog"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from catalog import schema, signals  # noqa: F401  schema registers the bearer scheme with drf-spectacular
        from catalog.tasks import ensure_scan_schedule, recover_on_worker_start

        signals.connect()

        post_migrate.connect(ensure_scan_schedule, sender=self, dispatch_uid="lectern-scan-schedule")
        post_spawn.connect(recover_on_worker_start, dispatch_uid="lectern-recover-runs")
