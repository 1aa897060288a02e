from django.apps import AppConfig
from django.db.models.signals import post_migrate


class CatalogConfig(AppConfig):
    name = "catalog"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from catalog import signals
        from catalog.tasks import ensure_scan_schedule

        signals.connect()

        post_migrate.connect(ensure_scan_schedule, sender=self, dispatch_uid="lectern-scan-schedule")
