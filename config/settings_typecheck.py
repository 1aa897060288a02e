"""Settings mypy's Django plugin imports (pyproject [tool.django-stubs]): the real ones,
with placeholders for what config.settings would otherwise fetch at import, so `make
lint` needs no Postgres and writes nothing. The plugin never connects to the database."""

import os

# Without DATABASE_URL, config.settings starts the embedded Postgres; without SECRET_KEY
# it creates var/secret_key. Neither is needed to read the models.
os.environ.setdefault("DATABASE_URL", "postgres://typecheck.invalid/lectern")
os.environ.setdefault("SECRET_KEY", "typecheck-only-" + "x" * 50)

from config.settings import *  # noqa: E402, F403
