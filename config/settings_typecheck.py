"""Settings mypy's Django plugin imports (pyproject [tool.django-stubs]): the real ones,
with a placeholder for what config.settings would otherwise write at import, so `make
lint` writes nothing. The plugin never connects to the database."""

import os

# Without SECRET_KEY, config.settings creates var/secret_key; reading the models needs none.
os.environ.setdefault("SECRET_KEY", "typecheck-only-" + "x" * 50)

from config.settings import *  # noqa: E402, F403
