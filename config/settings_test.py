"""Test settings: what must differ when the suite runs."""

import os

from config.settings import *  # noqa: F403
from config.settings import DATABASES, Q_CLUSTER, STORAGES

Q_CLUSTER = {**Q_CLUSTER, "sync": True}
# Pages render without a collectstatic run (the manifest is for served deployments).
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
# Nor does WhiteNoise look for the collected files at start (no "No directory" warning).
WHITENOISE_AUTOREFRESH = True
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LECTERN_EMBEDDING_BATCH = 16
# Parallel runs on one server (several checkouts, CI beside a dev) need distinct names.
DATABASES["default"]["TEST"] = {"NAME": os.environ.get("LECTERN_TEST_DB", "test_lectern")}
# A replica named in the environment is the test database itself here: the tests that
# read from a real replica start one for their own processes (tests/topology.py).
if "replica" in DATABASES:
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
# No process looks for resets others answered: a look is a query, and it would land in
# whichever request came due, where query counts are pinned (tests/retrieval/test_status.py
# turns it on where it is the subject).
LECTERN_RUNTIME_POLL_SECONDS = 0
