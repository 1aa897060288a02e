"""Forms of the reviewer's pages: the queue's filters (GET), and the decisions (POST);
the audit log's filters are approvals.filters.AuditFilter. They read and validate input
only; the services decide."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import Exists, OuterRef

from approvals.models import COMMENT_MAX_CHARS, ApprovalRequest, Decision
from approvals.services.bulk import BULK_MAX
from catalog.models import Agent, Catalog, ReferenceSource
from catalog.widgets import FastSelect

SEARCH_MAX_CHARS = 200


class SourceChoiceField(forms.ModelChoiceField[ReferenceSource]):
    def label_from_instance(self, obj: ReferenceSource) -> str:
        return f"{obj.catalog.slug}/{obj.slug}"


class QueueFilterForm(forms.Form):
    """The queue's filters. Without a `state` in the query the queue shows pending
    requests; an empty one shows every state."""

    state = forms.ChoiceField(choices=[("", "any state"), *ApprovalRequest.State.choices], required=False,
                              widget=FastSelect)
    catalog = forms.ModelChoiceField(queryset=Catalog.objects.live().order_by("slug"), to_field_name="slug",
                                     required=False, empty_label="any catalog", widget=FastSelect)
    source = SourceChoiceField(queryset=ReferenceSource.objects.none(), required=False, empty_label="any source",
                               widget=FastSelect)
    agent = forms.ModelChoiceField(queryset=Agent.objects.none(), required=False, empty_label="any agent",
                                   widget=FastSelect)
    via = forms.ChoiceField(choices=[("", "any way"), *ApprovalRequest.Via.choices], required=False,
                            label="Raised via", widget=FastSelect)
    q = forms.CharField(max_length=SEARCH_MAX_CHARS, required=False, strip=True, label="Context contains")

    def __init__(self, data: Any = None, **kwargs: Any) -> None:
        if data is not None and "state" not in data:
            data = data.copy()
            data["state"] = ApprovalRequest.State.PENDING
        super().__init__(data, **kwargs)
        # Only what has requests (an EXISTS per row, and only the columns a label needs:
        # a DISTINCT over the joined rows compared whole sources, content included).
        sources = ReferenceSource.objects.filter(Exists(ApprovalRequest.objects.filter(source=OuterRef("pk")))) \
            .select_related("catalog").order_by("catalog__slug", "slug")
        agents = Agent.objects.filter(Exists(ApprovalRequest.objects.filter(agent=OuterRef("pk")))).order_by("name")
        self.fields["source"].queryset = sources  # type: ignore[attr-defined]
        self.fields["agent"].queryset = agents  # type: ignore[attr-defined]
        # The options as plain tuples (the querysets above only validate what comes back):
        # a thousand model instances cost tens of milliseconds the page does not need.
        self.fields["source"].widget.choices = [
            ("", "any source"),
            *((pk, f"{catalog}/{slug}") for pk, catalog, slug in sources.values_list("pk", "catalog__slug", "slug"))]
        self.fields["agent"].widget.choices = [
            ("", "any agent"), *agents.values_list("pk", "name")]

    def filters(self) -> dict[str, Any]:
        """The keyword arguments of approvals.selectors.requests.requests_filtered (after
        is_valid)."""
        data = self.cleaned_data
        return {"state": data["state"], "catalog": data["catalog"], "source": data["source"],
                "agent": data["agent"], "raised_via": data["via"], "text": data["q"]}


class DecideForm(forms.Form):
    verdict = forms.ChoiceField(choices=Decision.Verdict.choices)
    comment = forms.CharField(max_length=COMMENT_MAX_CHARS, required=False, strip=True,
                              widget=forms.Textarea(attrs={"rows": 3}))


class RevokeForm(forms.Form):
    reason = forms.CharField(max_length=COMMENT_MAX_CHARS, strip=True, widget=forms.Textarea(attrs={"rows": 2}))


class RequestIdsField(forms.Field):
    """Several request ids, as checkboxes send them (name=ids, once per box)."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[int]:
        values = value if isinstance(value, list | tuple) else [value] if value else []
        try:
            return list(dict.fromkeys(int(v) for v in values))
        except (TypeError, ValueError):
            raise forms.ValidationError("request ids are numbers") from None

    def validate(self, value: list[int]) -> None:
        if not value:
            raise forms.ValidationError("Choose at least one request.")
        if len(value) > BULK_MAX:
            raise forms.ValidationError(f"At most {BULK_MAX} requests are decided at once.")


class BulkDecideForm(DecideForm):
    ids = RequestIdsField()
