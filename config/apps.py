from django.apps import AppConfig


class LecternConfig(AppConfig):
    """`config` is an app only to carry the serving commands (`runserver`, which must
    come before django.contrib.staticfiles' to replace it, and `bench_connections`);
    it has no models."""

    name = "config"
    label = "config"
