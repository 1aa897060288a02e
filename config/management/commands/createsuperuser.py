"""Django's createsuperuser, with the password rules (AUTH_PASSWORD_VALIDATORS) applied
without input too: Django checks a typed password, but takes DJANGO_SUPERUSER_PASSWORD
under --noinput unchecked."""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth.management.commands import createsuperuser
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError


class Command(createsuperuser.Command):
    def handle(self, *args: Any, **options: Any) -> None:
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
        if not options["interactive"] and password is not None:
            username = options["username"] or os.environ.get("DJANGO_SUPERUSER_USERNAME", "")
            try:
                validate_password(password, User(username=username))  # Lectern's users are Django's User
            except ValidationError as exc:
                raise CommandError(f"DJANGO_SUPERUSER_PASSWORD: {' '.join(exc.messages)}") from None
        super().handle(*args, **options)
