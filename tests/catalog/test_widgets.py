"""FastSelect writes what Django's Select writes (as HTML, not byte for byte): the chosen
option selected, labels and values escaped, the attributes the form gives."""

from __future__ import annotations

import pytest
from django import forms
from django.test.html import parse_html

from catalog.widgets import FastSelect

pytestmark = pytest.mark.unit

CHOICES = [("", "any"), ("a", "Alpha"), ("b&c", "<b> & \"c\""), (3, "three")]


@pytest.mark.parametrize("value", [None, "", "a", "b&c", 3, "missing"])
@pytest.mark.parametrize("attrs", [None, {"id": "id_x", "required": True, "class": "wide \"x\"", "disabled": False}])
def test_it_renders_what_select_renders(value, attrs):
    ours = FastSelect(choices=CHOICES).render("x", value, attrs=attrs)
    django = forms.Select(choices=CHOICES).render("x", value, attrs=attrs)

    assert parse_html(ours) == parse_html(django)


def test_a_label_cannot_inject_markup():
    html = FastSelect(choices=[("1", "</select><script>alert(1)</script>")]).render("x", "1")

    assert "<script>" not in html and "&lt;script&gt;" in html
