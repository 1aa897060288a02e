"""Secrets sealed at rest: a secret Lectern must read back to use (a webhook endpoint's
signing secret, a git source's token or deploy key) cannot be stored hashed like a
token; it is encrypted (Fernet: AES-128-CBC + HMAC-SHA256) with a key derived from
SECRET_KEY and the secret's purpose, so a database dump or backup alone does not give
it away. A SECRET_KEY changed with the old one in SECRET_KEY_FALLBACKS still opens it;
changed without, the secret must be entered again."""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.utils.crypto import salted_hmac


class SecretUnreadable(Exception):
    pass


def _fernet(purpose: str, key: str | bytes) -> Fernet:
    derived = salted_hmac(purpose, "sealing key", secret=key, algorithm="sha256").digest()
    return Fernet(base64.urlsafe_b64encode(derived))


def _keys(purpose: str) -> MultiFernet:
    return MultiFernet([_fernet(purpose, settings.SECRET_KEY),
                        *(_fernet(purpose, k) for k in settings.SECRET_KEY_FALLBACKS)])


def seal(secret: str, *, purpose: str) -> str:
    return _keys(purpose).encrypt(secret.encode("utf-8")).decode("ascii")


def unseal(sealed: str, *, purpose: str, what: str) -> str:
    """The secret; SecretUnreadable, saying what to do about `what`, when no key opens it."""
    try:
        return _keys(purpose).decrypt(sealed.encode("ascii")).decode("utf-8")
    except InvalidToken:
        raise SecretUnreadable(f"{what} cannot be opened with SECRET_KEY (or SECRET_KEY_FALLBACKS): was SECRET_KEY "
                               "changed? Put the old key in SECRET_KEY_FALLBACKS, or enter it again") from None
