"""Endpoint secrets sealed at rest (catalog.sealing: a secret must be readable to sign
with, so it is encrypted, not hashed). A SECRET_KEY changed without the old one in
SECRET_KEY_FALLBACKS leaves the endpoint's secret to be rotated (delivery says so)."""

from __future__ import annotations

from catalog import sealing
from catalog.sealing import SecretUnreadable

KEY_SALT = "lectern.approvals.webhook-secret"
HINT_CHARS = 4

__all__ = ["SecretUnreadable", "hint", "seal", "unseal"]


def seal(secret: str) -> str:
    return sealing.seal(secret, purpose=KEY_SALT)


def unseal(sealed: str) -> str:
    return sealing.unseal(sealed, purpose=KEY_SALT, what="the endpoint's secret")


def hint(secret: str) -> str:
    """What the admin and listings show of a secret: its last characters."""
    return "whsec_…" + secret[-HINT_CHARS:]
