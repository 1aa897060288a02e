"""The memory page's forms: which end users to show, and an erasure confirmed by typing
the end user's id again; retrieval.memory.services erases."""

from __future__ import annotations

from typing import Any

from django import forms

from retrieval.models import END_USER_MAX


class EndUserForm(forms.Form):
    """An agent's memory page: its end users whose id contains `q`, or one end user."""

    q = forms.CharField(max_length=200, required=False, strip=True, label="End user id contains")
    user = forms.CharField(max_length=END_USER_MAX, required=False, strip=False, label="End user")


class EraseForm(forms.Form):
    """Erasing an end user's memory: their id, typed again to confirm."""

    user = forms.CharField(max_length=END_USER_MAX, widget=forms.HiddenInput)
    confirm = forms.CharField(max_length=END_USER_MAX, strip=False, label="Type the end user's id to confirm")

    def __init__(self, *args: Any, user_id: str, **kwargs: Any) -> None:
        kwargs.setdefault("initial", {"user": user_id})
        super().__init__(*args, **kwargs)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "confirm" in data and data["confirm"] != data.get("user"):
            self.add_error("confirm", "Type the end user's id exactly as shown to erase their memory.")
        return data
