import atexit
import os
import threading

from django.core.wsgi import get_wsgi_application

from config.database import server_database

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
server_database()  # DATABASE_URL; the embedded Postgres only with DEBUG on
application = get_wsgi_application()


def _warm_up() -> None:
    """Load (and sha256-check) the embedding model now, not on the first query."""
    from catalog.embedder import get_embedder

    get_embedder()


_warming = threading.Thread(target=_warm_up, name="embedder-warm-up", daemon=True)
_warming.start()
# A process that exits while the model is still loading (a check that only imports this
# module) waits for the load: finalising the interpreter under ONNX Runtime's session
# set-up aborts the process ("terminate called without an active exception").
atexit.register(_warming.join, timeout=60)
