"""gunicorn settings for `make serve` (python -m config.serve), read from the environment.

Database connections stay bounded: gthread workers run requests on a fixed pool of
`threads` threads per worker process, Django keeps at most one connection per thread
(CONN_MAX_AGE, health-checked), and keep-alive clients wait in the worker's poller, not
on a thread. So the web tier holds at most LECTERN_WEB_WORKERS x LECTERN_WEB_THREADS
connections (8 by default), whatever the number of clients; docs/deploying.md, "Connections",
adds the worker's and compares the sum with max_connections.
"""

from config.database import server_database
from config.env import env_int
from config.ports import lectern_bind

# DEBUG is off here: without DATABASE_URL, gunicorn stops now with one line, before a
# worker boots (config.wsgi checks the same for any other WSGI server).
server_database()

wsgi_app = "config.wsgi:application"
bind = lectern_bind()
# gthread, gathering each request (head and body) before a thread serves it: a client
# that never sends its body holds no thread (config/gunicorn_worker.py).
worker_class = "config.gunicorn_worker.GatheringWorker"
workers = env_int("LECTERN_WEB_WORKERS", 2, minimum=1)
threads = env_int("LECTERN_WEB_THREADS", 4, minimum=1)
# A worker silent this long (a request stuck in it) is killed and replaced.
timeout = env_int("LECTERN_WEB_TIMEOUT", 60, minimum=5)
graceful_timeout = 30
keepalive = 5
accesslog = "-"
# gunicorn's default line with the path alone (%(U)s), not the request line (%(r)s): a
# query may carry an end user's id or what they searched for, which logs must not keep.
access_log_format = '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s "%(f)s" "%(a)s"'
# The control socket defaults to one path per user ($HOME/.gunicorn/gunicorn.ctl): a
# second server on the machine (another checkout, the test suite) would take it over.
control_socket_disable = True
