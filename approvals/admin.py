"""Admin for approvals: every write goes through the services, so the admin checks the
same roles (curator for policies, reviewer for decisions) and leaves the same audit
entries as the web queue and the channels. Requests, decisions, kept content and the
audit log are read-only here; the audit log cannot be changed anywhere."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from approvals.models import ApprovalPolicy, ApprovalRequest, ApprovedContent, Decision
from approvals.selectors.requests import with_state_now
from approvals.services.decisions import request_decide
from approvals.services.policies import FIELDS, policy_create, policy_delete, policy_update
from approvals.services.revocation import approval_revoke
from catalog.errors import ApplicationError
from catalog.models import AuditEntry
from catalog.web import person

if TYPE_CHECKING:
    from approvals.selectors.requests import RequestNow




class ReadOnly(admin.ModelAdmin[Any]):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApprovalPolicy)
class ApprovalPolicyAdmin(admin.ModelAdmin[ApprovalPolicy]):
    list_display = ["pk", "scope", "target_label", "all_agents", "required_approvals", "lifetime", "four_eyes",
                    "allow_self_approval", "disclose_matches", "changed_by", "updated_at"]
    list_filter = ["scope", "four_eyes", "allow_self_approval", "disclose_matches", "all_agents"]
    filter_horizontal = ["agents"]
    readonly_fields = ["changed_by", "created_at", "updated_at"]
    actions = ["delete_through_the_service"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApprovalPolicy | None = None) -> list[str]:
        fixed = ["scope", "catalog", "source", "tag"] if obj is not None else []  # a new target is a new policy
        return [*self.readonly_fields, *fixed]

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # deleting goes through policy_delete, one audit entry each
        return actions

    def save_model(self, request: HttpRequest, obj: ApprovalPolicy, form: forms.ModelForm[ApprovalPolicy],
                   change: bool) -> None:
        """Through the services, which also set the agents named (save_related does not)."""
        data = form.cleaned_data
        agents = None if data.get("all_agents", True) else list(data.get("agents", []))
        fields = {name: data[name] for name in FIELDS if name in data and name != "all_agents"}
        if change:
            policy = policy_update(policy_id=obj.pk, by=person(request), agents=agents,
                                   all_agents=agents is None, **fields)
        else:
            policy = policy_create(by=person(request), catalog=data.get("catalog"), source=data.get("source"),
                                   tag=data.get("tag"), agents=agents, **fields)
        obj.pk, obj.changed_by, obj.created_at, obj.updated_at = (policy.pk, policy.changed_by, policy.created_at,
                                                                  policy.updated_at)

    def save_related(self, request: HttpRequest, form: forms.ModelForm[ApprovalPolicy], formsets: Any,
                     change: bool) -> None:
        """The agents were set by save_model's service call."""

    def delete_model(self, request: HttpRequest, obj: ApprovalPolicy) -> None:
        policy_delete(policy_id=obj.pk, by=person(request))

    @admin.action(description="Delete the selected policies (audited)", permissions=["delete"])
    def delete_through_the_service(self, request: HttpRequest, queryset: QuerySet[ApprovalPolicy]) -> None:
        for policy in queryset:
            policy_delete(policy_id=policy.pk, by=person(request))


class DecisionInline(admin.TabularInline[Decision, ApprovalRequest]):
    model = Decision
    extra = 0
    can_delete = False
    readonly_fields = ["reviewer", "verdict", "comment", "channel", "created_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class StateNowFilter(admin.SimpleListFilter):
    """By the state the gate concludes (with_state_now), as the queue and the API filter:
    an approval whose time is up is expired, whether or not the expiry task marked it."""

    title = "state"
    parameter_name = "state_now"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(ApprovalRequest.State.choices)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset if value is None else queryset.filter(state_now=value)


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnly):
    list_display = ["pk", "source", "agent", "state_now", "approvals", "raised_via", "causes", "created_at",
                    "decided_at", "expires_at"]
    list_filter = [StateNowFilter, "raised_via", "source__catalog"]
    search_fields = ["source__slug", "agent__name", "context"]
    list_select_related = ["source__catalog", "agent"]
    readonly_fields = ["state_now"]
    inlines = [DecisionInline]
    actions = ["approve", "reject", "revoke"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApprovalRequest]:
        """With the state the gate concludes now (the stored one lags the expiry task)."""
        return with_state_now(super().get_queryset(request)).prefetch_related("caused_by")

    @admin.display(description="state now", ordering="state_now")
    def state_now(self, obj: RequestNow) -> str:
        return obj.state_now

    @admin.display(description="caused by")
    def causes(self, obj: ApprovalRequest) -> str:
        return ", ".join(sorted(user.get_username() for user in obj.caused_by.all())) or "-"

    def _each(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest], act: Any) -> None:
        done = 0
        for pk in queryset.values_list("pk", flat=True):
            try:
                act(pk)
                done += 1
            except ApplicationError as exc:
                self.message_user(request, f"request {pk}: {exc.message}", messages.ERROR)
        if done:
            self.message_user(request, f"{done} request(s) done.", messages.SUCCESS)

    @admin.action(description="Approve the selected requests", permissions=["view"])
    def approve(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> None:
        self._each(request, queryset, lambda pk: request_decide(
            request_id=pk, reviewer=person(request), verdict="approve", channel=Decision.Channel.ADMIN))

    @admin.action(description="Reject the selected requests", permissions=["view"])
    def reject(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> None:
        self._each(request, queryset, lambda pk: request_decide(
            request_id=pk, reviewer=person(request), verdict="reject", channel=Decision.Channel.ADMIN))

    @admin.action(description="Revoke the selected approvals", permissions=["view"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]) -> None:
        self._each(request, queryset, lambda pk: approval_revoke(request_id=pk, by=person(request)))


@admin.register(ApprovedContent)
class ApprovedContentAdmin(ReadOnly):
    list_display = ["source", "fingerprint", "created_at"]
    list_select_related = ["source__catalog"]


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnly):
    list_display = ["seq", "at", "actor_kind", "actor_name", "action", "request_id", "source_id", "agent_id",
                    "fingerprint"]
    list_filter = ["action", "actor_kind"]
    search_fields = ["actor_name", "action", "fingerprint"]
