"""The approvals' shapes: the fields every read path's answer uses to name the request an
agent should follow (`request_id`) and the gate's state, and the agent's list of its
requests, whose body `approval_requests_response` builds for REST (approvals.apis) and
the MCP tool approval_requests alike."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from approvals.models import ApprovalRequest
from approvals.selectors.requests import AgentRequest, agent_requests
from catalog.models import Agent

GATE_STATES = "not_required, approved, pending, rejected, revoked, expired or missing"


def request_id_field(**options: Any) -> serializers.IntegerField:
    """The approval request a withheld reference waits on (GET /api/v1/approvals)."""
    options.setdefault("help_text", "The approval request to follow for a withheld reference "
                                    "(GET /api/v1/approvals); null when allowed or none was raised.")
    return serializers.IntegerField(allow_null=True, **options)


def gate_state_field(**options: Any) -> serializers.CharField:
    options.setdefault("help_text", f"The approval gate's state: {GATE_STATES}.")
    return serializers.CharField(**options)


class ApprovalRequestSerializer(serializers.Serializer[AgentRequest]):
    id = serializers.IntegerField()
    catalog = serializers.CharField()
    source_id = serializers.CharField(help_text="The reference id (the source's slug).")
    fingerprint = serializers.CharField(help_text="The content it was raised for.")
    state = serializers.ChoiceField(
        choices=ApprovalRequest.State.choices,
        help_text="As the approval gate sees it now: an approval whose time is up is expired at once.")
    current = serializers.BooleanField(help_text="Raised for the content the reference holds now.")
    raised_via = serializers.ChoiceField(choices=ApprovalRequest.Via.choices)
    # named like Field.context, which the stubs declare (DRF's metaclass takes declared
    # fields off the class, so there is no clash at run time)
    context = serializers.CharField(help_text="What raised it.")  # type: ignore[assignment]
    approvals = serializers.IntegerField(min_value=0, help_text="Distinct reviewers who approved it.")
    required_approvals = serializers.IntegerField(
        min_value=1, help_text="Approvals the policies covering it require now for this agent.")
    previous_id = serializers.IntegerField(allow_null=True, help_text="The request it follows (content changed).")
    comment = serializers.CharField(help_text="The deciding reviewer's comment (a rejection's reason); may be empty.")
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True, help_text="When the approval ends; null: never.")
    ended_at = serializers.DateTimeField(allow_null=True, help_text="When it expired (its time was up), was "
                                                                    "revoked or lapsed.")


class ApprovalListQuerySerializer(serializers.Serializer[None]):
    # Given empty, a query parameter is read as absent: the schema admits "".
    state = serializers.ChoiceField(choices=ApprovalRequest.State.choices, required=False, default="",
                                    allow_blank=True, help_text="Only requests in this state (as `state` "
                                                                "says: the gate's, now).")
    limit = serializers.IntegerField(min_value=1, max_value=200, required=False, default=50)
    offset = serializers.IntegerField(min_value=0, max_value=1_000_000, required=False, default=0)


class ApprovalListOutputSerializer(serializers.Serializer[dict[str, Any]]):
    count = serializers.IntegerField(min_value=0, help_text="Requests matching, over all pages.")
    results = ApprovalRequestSerializer(many=True)


def approval_requests_response(agent: Agent, params: dict[str, Any]) -> dict[str, Any]:
    """The endpoint's body for validated `params` (REST, and the MCP tool approval_requests)."""
    count, page = agent_requests(agent=agent, state=params["state"], limit=params["limit"], offset=params["offset"])
    return ApprovalListOutputSerializer({"count": count, "results": page}).data
