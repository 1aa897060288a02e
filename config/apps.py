from django.apps import AppConfig


class LecternConfig(AppConfig):
    """`config` is an app only to carry the commands that replace Django's own:
    `runserver` (which must come before django.contrib.staticfiles' to replace it) and
    `migrate` (run as the schema's owner); and the system checks of the deployment's
    settings (config.checks). It has no models."""

    name = "config"
    label = "config"

    def ready(self) -> None:
        from config import checks  # noqa: F401  (registers them)
