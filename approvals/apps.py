from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ApprovalsConfig(AppConfig):
    name = "approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from approvals import panels
        from approvals.channels import admin as channels_admin  # noqa: F401  (registers the channels' admin)
        from approvals.services import receivers
        from approvals.tasks import ensure_channel_schedules, ensure_checkpoint_schedule, ensure_expiry_schedule

        receivers.connect()  # catalog's announcement: a source's content switched (lapse)
        panels.register()  # the approval state on catalog's source page, what goes when one is deleted
        post_migrate.connect(ensure_expiry_schedule, sender=self, dispatch_uid="lectern-expiry-schedule")
        post_migrate.connect(ensure_channel_schedules, sender=self, dispatch_uid="lectern-channel-schedules")
        post_migrate.connect(ensure_checkpoint_schedule, sender=self, dispatch_uid="lectern-checkpoint-schedule")
