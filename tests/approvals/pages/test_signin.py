"""Signing in and out: the sign-in page sends a person back where they were going, says
plainly when the name or password is wrong, refuses to send them off-site; signing
out is a POST with its CSRF token."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

LOGIN = reverse("login")


def test_the_sign_in_page_brings_a_reviewer_back_to_the_page_they_asked_for(rita):
    client = Client(enforce_csrf_checks=True)
    queue = reverse("approvals-queue") + "?state=pending"
    sent = client.get(queue)
    assert sent.status_code == 302
    page = client.get(sent["Location"])
    assert page.status_code == 200 and b"Sign in to continue." in page.content
    assert b'name="next" value="/approvals/?state=pending"' in page.content

    response = client.post(LOGIN, {"username": "rita", "password": "pw", "next": queue,
                                   "csrfmiddlewaretoken": page.context["csrf_token"]})

    assert response.status_code == 302 and response["Location"] == queue
    assert client.get(queue).status_code == 200


def test_a_wrong_password_says_so_and_signs_no_one_in(rita):
    client = Client()

    response = client.post(LOGIN, {"username": "rita", "password": "wrong", "next": "/approvals/"})

    assert response.status_code == 200
    assert b'role="alert"' in response.content and b"Please enter a correct username and password" in response.content
    assert b'value="/approvals/"' in response.content  # still going there after a retry
    assert client.get(reverse("approvals-queue")).status_code == 302


def test_next_never_leads_off_site(rita):
    response = Client().post(LOGIN, {"username": "rita", "password": "pw", "next": "https://evil.example/"})
    assert response.status_code == 302 and response["Location"] == "/"


def test_signing_out_is_a_post_that_needs_its_token(rita):
    client = Client(enforce_csrf_checks=True)
    client.force_login(rita)
    page = client.get(reverse("approvals-queue"))

    assert client.get(reverse("logout")).status_code == 405
    assert client.post(reverse("logout")).status_code == 403
    out = client.post(reverse("logout"), {"csrfmiddlewaretoken": page.context["csrf_token"]})

    assert out.status_code == 302 and out["Location"] == LOGIN
    assert client.get(reverse("approvals-queue")).status_code == 302
