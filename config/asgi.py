import os

from django.core.asgi import get_asgi_application

from config.database import ensure_database

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
ensure_database()  # the embedded Postgres, unless DATABASE_URL names a server
application = get_asgi_application()
