"""A source that cannot be read as configured."""

from __future__ import annotations


class SourceError(Exception):
    """A source that cannot be read as configured (bad glob, bad upload, ...)."""
