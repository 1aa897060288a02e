"""Sign-in throttling (issue 20, item 9; django-axes): failures for one user name from one
address lock that pair out, the right password included, until the cool-off has passed
(the clock moved by time-machine, never slept on); the page says so; other addresses and
agents' bearer tokens are not affected; no password or token is kept in the attempts.
Failures over many names from one address lock the address (password spraying). The
address is the client's: behind LECTERN_TRUSTED_PROXIES proxies it is read from
X-Forwarded-For, counted from the right; with none, that header is ignored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.apps import apps
from django.conf import settings
from django.test import Client
from django.urls import reverse

from tests.factories import agent_with_token, person

pytestmark = pytest.mark.django_db

LOGIN = reverse("login")
QUEUE = reverse("approvals-queue")
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
PROXY = "10.0.0.2"  # the reverse proxy in front, as gunicorn sees it (REMOTE_ADDR)


def sign_in(client: Client, password: str, *, username: str = "rita", **extra):
    return client.post(LOGIN, {"username": username, "password": password, "next": QUEUE}, **extra)


def signed_in(client: Client) -> bool:
    return client.get(QUEUE).status_code == 200


def test_thirty_wrong_passwords_lock_the_name_out_until_the_cool_off_has_passed(rita):
    client = Client()
    with time_machine.travel(START, tick=False) as clock:
        for _ in range(30):
            assert sign_in(client, "wrong").status_code in (200, 429)

        refused = sign_in(client, "pw")  # the right password

        assert refused.status_code == 429 and not signed_in(client)
        page = refused.content.decode()
        assert 'role="alert"' in page and "Too many failed sign-ins for this user name from your address" in page
        assert f"for {settings.AXES_COOLOFF_TIME.seconds // 60} minutes after the last attempt" in page
        assert 'name="username"' in page and f'value="{QUEUE}"' in page  # the form, still going there

        clock.shift(settings.AXES_COOLOFF_TIME - timedelta(seconds=1))
        assert sign_in(client, "pw").status_code == 429 and not signed_in(client)  # not yet (and it starts again)

        clock.shift(settings.AXES_COOLOFF_TIME + timedelta(seconds=1))
        let_in = sign_in(client, "pw")

        assert let_in.status_code == 302 and let_in["Location"] == QUEUE and signed_in(client)


def test_the_limit_is_the_setting_and_a_success_before_it_starts_the_count_again(rita, settings):
    settings.AXES_FAILURE_LIMIT = 3
    client = Client()
    for _ in range(2):
        sign_in(client, "wrong")
    assert sign_in(client, "pw").status_code == 302  # two failures: still let in, and the count reset
    client.post(reverse("logout"))
    for _ in range(2):
        sign_in(client, "wrong")
    assert sign_in(client, "pw").status_code == 302

    client.post(reverse("logout"))
    for _ in range(3):
        sign_in(client, "wrong")
    assert sign_in(client, "pw").status_code == 429


def test_the_lock_holds_one_name_from_one_address_only(rita):
    cora = person("cora", "curator")
    for _ in range(10):
        sign_in(Client(), "wrong")

    assert sign_in(Client(), "pw").status_code == 429
    assert sign_in(Client(), "pw", REMOTE_ADDR="192.0.2.7").status_code == 302  # rita elsewhere
    assert sign_in(Client(), "pw", username=cora.username).status_code == 302  # cora from here


def test_the_admin_sign_in_is_locked_too(db):
    person("ada", "curator", is_staff=True)
    client = Client()
    for _ in range(10):
        client.post(reverse("admin:login"), {"username": "ada", "password": "wrong"})

    refused = client.post(reverse("admin:login"), {"username": "ada", "password": "pw", "next": "/admin/"})

    assert refused.status_code == 429 and b"Too many failed sign-ins" in refused.content
    assert client.get("/admin/").status_code == 302  # not signed in


def test_an_agents_bearer_token_is_never_locked_out(rita, make_catalog):
    catalog = make_catalog("kb")
    _, token = agent_with_token(name="bot", catalogs=[catalog])
    for _ in range(10):
        sign_in(Client(), "wrong", username="bot")  # even under the agent's own name, from its address

    answer = Client().get("/api/v1/catalogs", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert answer.status_code == 200 and [c["slug"] for c in answer.json()] == ["kb"]


def test_the_attempts_keep_no_password_and_no_csrf_token(rita):
    client = Client(enforce_csrf_checks=True)
    token = str(client.get(LOGIN).context["csrf_token"])

    client.post(LOGIN, {"username": "rita", "password": "hunter2-guess", "csrfmiddlewaretoken": token})

    (attempt,) = apps.get_model("axes", "AccessAttempt").objects.all()
    kept = f"{attempt.post_data} {attempt.get_data} {attempt.username} {attempt.http_accept}"
    assert "hunter2-guess" not in kept and token not in kept
    assert attempt.username == "rita" and attempt.failures_since_start == 1


def behind_proxy(forwarded_for: str) -> dict[str, str]:
    """A request as the proxy passes it on: from the proxy, with the header it built."""
    return {"REMOTE_ADDR": PROXY, "HTTP_X_FORWARDED_FOR": forwarded_for}


def attempt_addresses() -> set[str | None]:
    return set(apps.get_model("axes", "AccessAttempt").objects.values_list("ip_address", flat=True))


def test_behind_one_trusted_proxy_two_clients_are_counted_apart(rita, settings):
    settings.LECTERN_TRUSTED_PROXIES = 1
    for _ in range(10):
        sign_in(Client(), "wrong", **behind_proxy("203.0.113.5"))

    assert sign_in(Client(), "pw", **behind_proxy("203.0.113.5")).status_code == 429
    assert sign_in(Client(), "pw", **behind_proxy("203.0.113.6")).status_code == 302  # rita, another client
    assert attempt_addresses() == {"203.0.113.5"}  # never the proxy's


def test_behind_one_trusted_proxy_what_the_client_wrote_in_the_header_is_not_believed(rita, settings):
    settings.LECTERN_TRUSTED_PROXIES = 1
    for n in range(10):  # nginx appends the address it saw to what the client sent
        sign_in(Client(), "wrong", **behind_proxy(f"198.51.100.{n}, 203.0.113.5"))

    assert sign_in(Client(), "pw", **behind_proxy("198.51.100.99, 203.0.113.5")).status_code == 429
    assert attempt_addresses() == {"203.0.113.5"}


def test_with_no_trusted_proxy_a_forged_header_changes_nothing(rita, settings):
    settings.LECTERN_TRUSTED_PROXIES = 0
    for n in range(10):  # an attacker at 127.0.0.1 naming another address each time
        sign_in(Client(), "wrong", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")

    assert sign_in(Client(), "pw", HTTP_X_FORWARDED_FOR="203.0.113.200").status_code == 429  # still counted
    assert sign_in(Client(), "pw", REMOTE_ADDR="203.0.113.1").status_code == 302  # and no one else locked
    assert attempt_addresses() == {"127.0.0.1"}


def spray(count: int, **extra: str) -> None:
    """One common password tried once on each of `count` user names."""
    for n in range(count):
        sign_in(Client(), "Spring2026!", username=f"staff{n}", **extra)


def test_spraying_one_password_over_many_names_locks_the_address_until_the_cool_off(rita, settings):
    settings.LECTERN_SIGNIN_ADDRESS_FAILURE_LIMIT = 8
    with time_machine.travel(START, tick=False) as clock:
        spray(8)

        client = Client()
        refused = sign_in(client, "pw")  # rita, right password, from the sprayer's address

        assert refused.status_code == 429 and not signed_in(client)
        assert "Too many failed sign-ins from your address" in refused.content.decode()
        assert sign_in(Client(), "pw", REMOTE_ADDR="192.0.2.7").status_code == 302  # rita elsewhere

        clock.shift(settings.AXES_COOLOFF_TIME + timedelta(seconds=1))
        assert sign_in(Client(), "pw").status_code == 302


def test_spraying_fewer_names_than_the_address_limit_locks_nothing(rita, settings):
    settings.LECTERN_SIGNIN_ADDRESS_FAILURE_LIMIT = 8
    spray(7)

    assert sign_in(Client(), "pw").status_code == 302


def test_signing_in_to_one_account_does_not_clear_the_address_count(rita, settings):
    settings.LECTERN_SIGNIN_ADDRESS_FAILURE_LIMIT = 8
    spray(7)
    assert sign_in(Client(), "pw").status_code == 302  # the sprayer's own account: its name's count only

    spray(1)

    assert sign_in(Client(), "pw").status_code == 429


def test_behind_the_proxy_a_sprayer_locks_its_own_address_only(rita, settings):
    settings.LECTERN_TRUSTED_PROXIES = 1
    settings.LECTERN_SIGNIN_ADDRESS_FAILURE_LIMIT = 8
    spray(8, **behind_proxy("203.0.113.5"))

    assert sign_in(Client(), "pw", **behind_proxy("203.0.113.5")).status_code == 429
    assert sign_in(Client(), "pw", **behind_proxy("203.0.113.6")).status_code == 302

