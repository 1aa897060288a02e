import os

from django.core.asgi import get_asgi_application

from config.database import server_database

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
server_database()  # DATABASE_URL; the embedded Postgres only with DEBUG on
application = get_asgi_application()
