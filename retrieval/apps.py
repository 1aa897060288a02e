from django.apps import AppConfig
from django.db.models.signals import post_migrate


class RetrievalConfig(AppConfig):
    name = "retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_q.signals import post_spawn, pre_execute

        from retrieval import panels, schema  # noqa: F401  schema registers its serializer extensions with drf-spectacular
        from retrieval.runtime import follow_before_task
        from retrieval.tasks import ensure_purge_schedule, recover_evaluations_on_worker_start

        panels.register()  # the mentions and links discovery follows, on catalog's source page
        post_migrate.connect(ensure_purge_schedule, sender=self, dispatch_uid="lectern-purge-traces-schedule")
        # The worker applies a curator's reset answered by a web process (retrieval.runtime).
        pre_execute.connect(follow_before_task, dispatch_uid="lectern-follow-resets")
        post_spawn.connect(recover_evaluations_on_worker_start, dispatch_uid="lectern-recover-evaluations")
