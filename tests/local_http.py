"""An HTTP server on 127.0.0.1 for tests that fetch (git, web crawls, webhooks): a free
port, served from a thread while the block runs, shut down and joined after it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def http_served(handler: type[BaseHTTPRequestHandler],
                wrap: Callable[[socket.socket], socket.socket] | None = None) -> Iterator[ThreadingHTTPServer]:
    """`handler` served on 127.0.0.1 at a free port; `wrap` takes the listening socket
    first (TLS). The server's URL: base_url()."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if wrap is not None:
        server.socket = wrap(server.socket)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def base_url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"
