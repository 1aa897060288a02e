"""Test settings: what must differ when the suite runs."""

from config.settings import *  # noqa: F403
from config.settings import Q_CLUSTER

Q_CLUSTER = {**Q_CLUSTER, "sync": True}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LECTERN_EMBEDDING_BATCH = 16
