"""Password rules (issue 20, item 9): Django's four validators (similarity to the user's
names, a minimum length, common passwords, all digits) wherever a password is set: the
admin's user forms, `manage.py changepassword` (a real child process typing at it),
`manage.py createsuperuser` (also without input, which Django leaves unchecked), and the
demo's admin. A refused password changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from catalog.demo_loader import demo_admin_ensure
from tests.config.servers import child_env
from tests.factories import person

User = get_user_model()
WEAK = ["password123", "40596837261548", "short1!"]  # common, all digits, too short
STRONG = "plum-orbit-lantern-42"


@pytest.mark.parametrize("weak", WEAK)
def test_each_weak_password_breaks_a_rule(weak):
    with pytest.raises(ValidationError):
        validate_password(weak)
    validate_password(STRONG)


def test_a_password_like_the_users_own_name_or_address_is_refused(db):
    user = User(username="margaretha", email="margaretha.lindqvist@example.com")
    with pytest.raises(ValidationError, match="too similar"):
        validate_password("lindqvist.margaretha", user)


@pytest.fixture
def superuser_client(client, db):
    client.force_login(person("ada", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize("weak", WEAK)
def test_the_admin_refuses_a_weak_password_for_a_user_and_changes_nothing(superuser_client, rita, weak):
    page = superuser_client.post(f"/admin/auth/user/{rita.pk}/password/", {"password1": weak, "password2": weak})

    assert page.status_code == 200 and b"errorlist" in page.content
    rita.refresh_from_db()
    assert rita.check_password("pw") and not rita.check_password(weak)

    changed = superuser_client.post(f"/admin/auth/user/{rita.pk}/password/", {"password1": STRONG, "password2": STRONG})
    rita.refresh_from_db()
    assert changed.status_code == 302 and rita.check_password(STRONG)


def test_the_admin_refuses_to_add_a_user_with_a_weak_password(superuser_client):
    page = superuser_client.post("/admin/auth/user/add/", {
        "username": "newcomer", "usable_password": "true", "password1": "password123", "password2": "password123"})

    assert page.status_code == 200 and b"This password is too common." in page.content
    assert not User.objects.filter(username="newcomer").exists()


def test_createsuperuser_without_input_refuses_a_weak_password(db, monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "password123")
    with pytest.raises(CommandError, match="This password is too common"):
        call_command("createsuperuser", "--noinput", "--username", "root2", "--email", "")
    assert not User.objects.filter(username="root2").exists()

    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", STRONG)
    call_command("createsuperuser", "--noinput", "--username", "root2", "--email", "")
    assert User.objects.get(username="root2").check_password(STRONG)


def test_changepassword_refuses_weak_passwords_and_keeps_the_old_one(transactional_db):
    rita = person("rita", "reviewer")
    typed = "".join(f"{weak}\n{weak}\n" for weak in WEAK)  # three tries, each typed twice

    # A new session: no terminal to open, so getpass reads what is typed on stdin.
    done = subprocess.run([sys.executable, "manage.py", "changepassword", "rita"], cwd=settings.BASE_DIR,
                          input=typed, capture_output=True, text=True, timeout=120, start_new_session=True,
                          env={**os.environ, **child_env()})

    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "This password is too common." in said and "This password is entirely numeric." in said
    assert "This password is too short." in said and "Aborting password change for user 'rita'" in said
    rita.refresh_from_db()
    assert rita.check_password("pw")


def test_the_demo_admin_gets_a_password_the_rules_accept(db, settings):
    password = demo_admin_ensure()
    assert password is not None
    validate_password(password, User.objects.get(username="admin"))

    User.objects.filter(username="admin").delete()
    settings.AUTH_PASSWORD_VALIDATORS = [{"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
                                          "OPTIONS": {"min_length": 64}}]  # rules its password cannot meet
    with pytest.raises(ValidationError, match="too short"):
        demo_admin_ensure()
    assert not User.objects.filter(username="admin").exists()
