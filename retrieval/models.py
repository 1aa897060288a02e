"""Agents: API callers with a bearer token, scoped to catalogs."""

from __future__ import annotations

import hashlib
import secrets

from django.db import models

TOKEN_PREFIX = "lct_"


def hash_token(token: str) -> str:
    """Tokens are 256-bit random strings, so a plain sha256 is a safe at-rest form."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class Agent(models.Model):
    name = models.CharField(max_length=100, unique=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_hint = models.CharField(max_length=12, editable=False, help_text="First characters, to tell tokens apart.")
    catalogs = models.ManyToManyField("catalog.Catalog", related_name="agents", blank=True)
    is_active = models.BooleanField(default=True)
    is_curator = models.BooleanField(default=False, help_text="May trigger reindexing of its catalogs.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    # DRF's IsAuthenticated asks the request's user this.
    is_authenticated = True
