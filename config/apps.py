from django.apps import AppConfig


class LecternConfig(AppConfig):
    """`config` is an app only to carry the serving command `runserver`, which must
    come before django.contrib.staticfiles' to replace it; it has no models."""

    name = "config"
    label = "config"
