"""Endpoint secrets sealed at rest. A secret must be readable to sign with, so it cannot
be stored hashed like a token; it is encrypted (Fernet: AES-128-CBC + HMAC-SHA256) with
a key derived from SECRET_KEY, so a database dump or backup alone does not give it
away. A SECRET_KEY changed with the old one in SECRET_KEY_FALLBACKS still opens it;
changed without, the endpoint's secret must be rotated (delivery says so)."""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.utils.crypto import salted_hmac

KEY_SALT = "lectern.approvals.webhook-secret"
HINT_CHARS = 4


class SecretUnreadable(Exception):
    pass


def _fernet(key: str | bytes) -> Fernet:
    derived = salted_hmac(KEY_SALT, "sealing key", secret=key, algorithm="sha256").digest()
    return Fernet(base64.urlsafe_b64encode(derived))


def _keys() -> MultiFernet:
    return MultiFernet([_fernet(settings.SECRET_KEY), *(_fernet(k) for k in settings.SECRET_KEY_FALLBACKS)])


def seal(secret: str) -> str:
    return _keys().encrypt(secret.encode("ascii")).decode("ascii")


def unseal(sealed: str) -> str:
    try:
        return _keys().decrypt(sealed.encode("ascii")).decode("ascii")
    except InvalidToken:
        raise SecretUnreadable("the endpoint's secret cannot be opened with SECRET_KEY (or SECRET_KEY_FALLBACKS): "
                               "was SECRET_KEY changed? Put the old key in SECRET_KEY_FALLBACKS, or rotate the "
                               "endpoint's secret") from None


def hint(secret: str) -> str:
    """What the admin and listings show of a secret: its last characters."""
    return "whsec_…" + secret[-HINT_CHARS:]
