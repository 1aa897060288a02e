"""Django's development server (with static files), closing each thread's database
connections when its client disconnects.

runserver serves every client connection in a thread of its own. Django keeps a
thread's database connection for CONN_MAX_AGE seconds after a request, but a runserver
thread ends with its client, so the connection it leaves behind is reused by no one and
closed only when the garbage collector gets to the thread's DatabaseWrapper: with 16
clients opening a connection per request, 160 idle backends piled up in 20 seconds
(docs/benchmarks.md, "Database connections under load"). Django's own live test server
(ThreadedWSGIServer) closes them in close_request, which runs in the request's thread as
it finishes; this server does the same.
"""

from __future__ import annotations

from django.contrib.staticfiles.management.commands.runserver import Command as StaticfilesRunserver
from django.core.servers.basehttp import WSGIServer
from django.db import connections


class ConnectionClosingWSGIServer(WSGIServer):
    def close_request(self, request) -> None:
        connections.close_all()  # this thread's connections: the thread ends after this
        super().close_request(request)


class Command(StaticfilesRunserver):
    server_cls = ConnectionClosingWSGIServer
