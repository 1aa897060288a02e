"""Typed environment readers that fail loudly on a bad value."""

from __future__ import annotations

import os
import secrets
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be >= {minimum}")
    return value


def env_list(name: str, default: list[str], *, sep: str = os.pathsep) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(sep) if item.strip()]


def env_networks(name: str, default: list[str]) -> list[IPv4Network | IPv6Network]:
    """Comma-separated networks in CIDR notation (a bare address is a network of one)."""
    networks = []
    for item in env_list(name, default, sep=","):
        try:
            networks.append(ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item!r} is not a network (use CIDR, e.g. 127.0.0.0/8)") from None
    return networks


def local_secret_key(path: Path) -> str:
    """A random key kept in `path` (mode 0600), created on first use, so sessions survive
    restarts and no key is ever written into the code. Processes starting together
    (web server, worker) agree on one key: it is written aside and linked into place,
    and whoever loses the race reads the winner's."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        aside = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(secrets.token_urlsafe(50) + "\n")
        try:
            os.link(aside, path)
        except FileExistsError:
            pass
        finally:
            aside.unlink()
    key = path.read_text(encoding="ascii").strip()
    if len(key) < 50:
        raise ImproperlyConfigured(f"{path} holds no usable secret key; delete it to have a new one made")
    return key
