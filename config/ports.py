"""Which process holds the address a server is about to listen on, read from /proc.

A start on a taken port would otherwise fail inside gunicorn after five retries, or
worse, leave the worker half of `make serve` running beside someone else's web server;
`config.serve` checks first and names the holder (often a server a `kill -9` left
behind): the pid and command line of the process listening there.
"""

from __future__ import annotations

import errno
import os
import re
import socket
from pathlib import Path

from config.env import env_str

LISTEN = "0A"  # the TCP state column of /proc/net/tcp
PORT = re.compile(r"[0-9]+")
MAX_PORT = 65535


def lectern_bind() -> str:
    """gunicorn's address (config/gunicorn.conf.py)."""
    return env_str("LECTERN_BIND", "127.0.0.1:8000")


def split_address(address: str, *, dev: bool = False) -> tuple[str, int] | None:
    """host and port of a `host:port` or `[v6]:port` address; None for a unix socket.
    `dev`: read as runserver reads it (`make run HOST=...`), where digits alone are a port
    on 127.0.0.1; gunicorn reads a word alone as a host, on port 8000. ValueError: the
    port is not a port number."""
    if address.startswith(("unix:", "fd://")):
        return None
    if dev and PORT.fullmatch(address):
        return "127.0.0.1", _port(address)
    host, _, port = address.rpartition(":")
    if not host or address.endswith("]"):  # gunicorn's "HOST" (or "[v6]") alone listens on 8000
        return address.strip("[]"), 8000
    return host.strip("[]"), _port(port)


def _port(text: str) -> int:
    if not PORT.fullmatch(text) or int(text) > MAX_PORT:
        raise ValueError(f"{text!r} is not a port number (0 to {MAX_PORT})")
    return int(text)


def address_holder(address: str, *, dev: bool = False) -> str | None:
    """None when this process could listen on `address` (as gunicorn binds: SO_REUSEADDR,
    which a closing connection does not block); else one line saying who listens there.
    OSError: it cannot be listened on for another reason (a host that does not resolve,
    or is not this machine's); ValueError: it is no address (split_address)."""
    split = split_address(address, dev=dev)
    if split is None:
        return None
    host, port = split
    family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(sockaddr)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
        else:
            return None
    return f"{address} is in use: {_listener(port)}"


def _listener(port: int) -> str:
    inodes = {inode for table in ("tcp", "tcp6") for inode in listening_inodes(_read(f"/proc/net/{table}"), port)}
    pids = _pids_holding(inodes)
    if not pids:
        return "no process this user may inspect listens on it"
    # gunicorn's workers share their arbiter's socket: name the one that opened it
    first = next((pid for pid in sorted(pids) if _parent(pid) not in pids), min(pids))
    return f"pid {first} listens on it ({_command_line(first)})"


def listening_inodes(table: str, port: int) -> list[int]:
    """The socket inodes listening on `port` in a /proc/net/tcp (or tcp6) table."""
    inodes = []
    for row in table.splitlines()[1:]:
        fields = row.split()
        if len(fields) > 9 and fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
            inodes.append(int(fields[9]))
    return inodes


def _pids_holding(inodes: set[int]) -> set[int]:
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in wanted for fd in (entry / "fd").iterdir()):
                pids.add(int(entry.name))
        except OSError:  # gone meanwhile, or another user's
            continue
    return pids


def _parent(pid: int) -> int:
    fields = _read(f"/proc/{pid}/stat").rsplit(")", 1)[-1].split()  # after the command's name
    return int(fields[1]) if len(fields) > 1 else 0


def _command_line(pid: int) -> str:
    return _read(f"/proc/{pid}/cmdline").replace("\0", " ").strip() or "?"


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""
