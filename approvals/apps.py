from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ApprovalsConfig(AppConfig):
    name = "approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from approvals.services import receivers
        from approvals.tasks import ensure_expiry_schedule

        receivers.connect()  # catalog's announcements: content switched, token issued, source changed
        post_migrate.connect(ensure_expiry_schedule, sender=self, dispatch_uid="lectern-expiry-schedule")
