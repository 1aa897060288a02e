"""The Content-Security-Policy every answer carries (config/settings.py), as the tests
read it: each directive and its sources, the same on every page and API answer but the
Redoc page's two additions (config/urls.py)."""

from __future__ import annotations

from typing import Any

STRICT = {
    "default-src": ["'self'"], "script-src": ["'self'"], "style-src": ["'self'"], "img-src": ["'self'", "data:"],
    "object-src": ["'none'"], "base-uri": ["'self'"], "form-action": ["'self'"], "frame-ancestors": ["'none'"],
}
RELAXED = {"/api/v1/redoc/": {"style-src": ["'self'", "'unsafe-inline'"], "worker-src": ["blob:"]}}


def policy_of(response: Any) -> dict[str, list[str]]:
    header = response.get("Content-Security-Policy") if hasattr(response, "get") else None
    assert header, "no Content-Security-Policy header"
    return {name: values for name, *values in (part.split() for part in header.split(";") if part.strip())}


def assert_policy(response: Any, path: str) -> None:
    """The policy `path` answers with: the strict one, or Redoc's with its two additions."""
    expected = {**STRICT, **RELAXED.get(path, {})}
    assert policy_of(response) == expected, f"{path}: {response.get('Content-Security-Policy')}"
