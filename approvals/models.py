"""Governance: which sources need a reviewer's approval for which agents (policies), the
requests agents raise and reviewers decide (bound to the content fingerprint they were
raised for), the text each approval covered (kept for the diff when the content
changes) (the audit log they write is catalog's: catalog.audit).

The rule the gate (approvals.selectors.gate) applies with these: a source that a policy (or
its own `requires_approval` flag) governs reaches an agent only while a request of that
agent for the source's current fingerprint is approved by enough distinct reviewers
and has neither expired nor been revoked or lapsed. docs/subsystems/governance.md.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models.functions import Length
from django.db.models.lookups import LessThanOrEqual

from catalog.models import Agent, Catalog, ReferenceSource, Tag

MAX_REQUIRED_APPROVALS = 10
CONTEXT_MAX_CHARS = 1000  # what a request keeps of the text that raised it
COMMENT_MAX_CHARS = 4000


class ApprovalPolicy(models.Model):
    """Sources that need approval: a whole catalog, one source, or every source with a
    tag (in any catalog), for every agent or the agents named. When several policies
    cover a source for an agent, the strictest of each setting applies: the most
    approvals, the shortest lifetime, four eyes if any asks for it, self-approval and
    matches disclosed only if every one allows them."""

    class Scope(models.TextChoices):
        CATALOG = "catalog"
        SOURCE = "source"
        TAG = "tag"

    scope = models.CharField(max_length=8, choices=Scope.choices)
    catalog = models.ForeignKey(Catalog, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    source = models.ForeignKey(ReferenceSource, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    tag = models.ForeignKey(Tag, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    all_agents = models.BooleanField(default=True, help_text="Every agent; otherwise only those named.")
    agents = models.ManyToManyField(Agent, blank=True, related_name="+")
    required_approvals = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_REQUIRED_APPROVALS)],
        help_text="Distinct reviewers who must approve a request.")
    lifetime = models.DurationField(null=True, blank=True, help_text="How long an approval lives; empty: forever.")
    four_eyes = models.BooleanField(
        default=False, help_text="Whoever last changed the source's content or a policy covering it may not approve.")
    allow_self_approval = models.BooleanField(
        default=False, help_text="The person whose change raised a request may decide it (only if every policy "
                                 "covering the source allows it; otherwise another reviewer decides).")
    disclose_matches = models.BooleanField(
        default=False,
        help_text="Tell an agent, while the source is withheld from it, whether its searches match the content (how "
                  "many passages) and raise its request then. Off: the source is named withheld whatever the query, "
                  "so probing with words learns nothing of the text. Every policy covering a source must allow it.")
    description = models.CharField(max_length=500, blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+", help_text="Who last created or changed this policy.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]
        verbose_name_plural = "approval policies"
        constraints = [
            models.CheckConstraint(
                name="policy_scope_names_one_target",
                condition=(models.Q(scope="catalog", catalog__isnull=False, source__isnull=True, tag__isnull=True)
                           | models.Q(scope="source", catalog__isnull=True, source__isnull=False, tag__isnull=True)
                           | models.Q(scope="tag", catalog__isnull=True, source__isnull=True, tag__isnull=False))),
            models.CheckConstraint(name="policy_required_approvals_range",
                                   condition=models.Q(required_approvals__gte=1,
                                                      required_approvals__lte=MAX_REQUIRED_APPROVALS)),
            models.CheckConstraint(name="policy_lifetime_positive",
                                   condition=models.Q(lifetime__isnull=True) | models.Q(lifetime__gt=timedelta(0))),
        ]

    def __str__(self) -> str:
        return f"policy {self.pk}: {self.scope} {self.target_label}"

    @property
    def target_label(self) -> str:
        if self.scope == self.Scope.CATALOG:
            return str(self.catalog)
        if self.scope == self.Scope.SOURCE:
            return str(self.source)
        return f"#{self.tag}"

    def clean(self) -> None:
        targets: dict[str, int | None] = {self.Scope.CATALOG: self.catalog_id, self.Scope.SOURCE: self.source_id,
                                          self.Scope.TAG: self.tag_id}
        if self.scope not in targets:
            return  # the field's own choices validation says so
        if targets[self.scope] is None:
            raise ValidationError({self.scope: f"A {self.scope} policy names its {self.scope}."})
        if any(value is not None for scope, value in targets.items() if scope != self.scope):
            raise ValidationError({"scope": f"A {self.scope} policy names only its {self.scope}."})
        if self.lifetime is not None and self.lifetime <= timedelta(0):
            raise ValidationError({"lifetime": "A lifetime is positive (leave it empty for forever)."})


class ApprovalRequest(models.Model):
    """An agent's request to read a source as it is now (its fingerprint). Raised by a
    read path the first time it withholds the source from the agent, by a reindex that
    changed the content of something approved or pending (carrying the diff), or by
    hand. At most one is pending per (source, agent, fingerprint)."""

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        EXPIRED = "expired"  # approved, and its lifetime ran out
        REVOKED = "revoked"  # approved, then withdrawn by a reviewer
        LAPSED = "lapsed"  # approved or pending, and the content changed (a new request carries the diff)

    class Via(models.TextChoices):
        ENRICHMENT = "enrichment"
        SELECT = "select"
        SEARCH = "search"
        MANUAL = "manual"
        REINDEX = "reindex", "reindex (the content of an approved or pending source changed)"

    source = models.ForeignKey(ReferenceSource, on_delete=models.CASCADE, related_name="approval_requests")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="approval_requests")
    fingerprint = models.CharField(max_length=64, help_text="The source's content fingerprint it was raised for.")
    raised_via = models.CharField(max_length=12, choices=Via.choices)
    context = models.TextField(blank=True, help_text=f"What raised it (at most {CONTEXT_MAX_CHARS} characters).")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    approvals = models.PositiveSmallIntegerField(default=0, help_text="Distinct reviewers who approved it so far.")
    previous = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                 help_text="The request this one follows (lapsed by a content change).")
    diff = models.TextField(blank=True, help_text="Unified diff of the last approved text against this content.")
    diff_base = models.CharField(max_length=64, blank=True, help_text="The approved fingerprint the diff is against.")
    caused_by = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="+",
        help_text="The people whose changes of the source's content it asks to approve (its authors when it was "
                  "raised: catalog.sources.editors); none of them decides it unless the policies allow "
                  "self-approval. Empty: no person.")
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True, help_text="When it was approved or rejected.")
    expires_at = models.DateTimeField(null=True, blank=True, help_text="When its approval ends; empty: never.")
    ended_at = models.DateTimeField(null=True, blank=True, help_text="When it expired, was revoked or lapsed.")
    notified_at = models.DateTimeField(null=True, blank=True, help_text="When reviewers were e-mailed about it.")

    class Meta:
        ordering = ["-pk"]
        constraints = [
            models.UniqueConstraint(fields=["source", "agent", "fingerprint"], condition=models.Q(state="pending"),
                                    name="one_pending_request_per_content"),
            models.CheckConstraint(name="request_context_bounded",
                                   condition=LessThanOrEqual(Length("context"), CONTEXT_MAX_CHARS)),
        ]
        indexes = [
            # the gate: an agent's requests for these sources, at their current fingerprints
            models.Index(fields=["agent", "source", "fingerprint"], name="request_gate"),
            # what search leaves out: the agent's approvals, read from the index alone
            models.Index(fields=["agent", "source", "fingerprint"], include=["approvals", "decided_at", "expires_at"],
                         condition=models.Q(state="approved"), name="request_live"),
            models.Index(fields=["source", "state"], name="request_source_state"),
            models.Index(fields=["state", "created_at"], name="request_queue"),
            models.Index(fields=["expires_at"], condition=models.Q(state="approved"), name="request_expiry"),
        ]

    def __str__(self) -> str:
        return f"request {self.pk} ({self.state})"

    @property
    def follows_other_content(self) -> bool:
        """Whether the request this one follows was for other content (the source changed
        in between), rather than for this same content (an approval that expired, or one
        short of the approvals a policy now requires). Reads `previous`: select it along."""
        return self.previous is not None and self.previous.fingerprint != self.fingerprint


class Decision(models.Model):
    """One reviewer's verdict on a request. A reviewer decides a request once; distinct
    approvals count toward the policy's required number, one rejection rejects it."""

    class Verdict(models.TextChoices):
        APPROVE = "approve"
        REJECT = "reject"

    class Channel(models.TextChoices):
        WEB = "web"
        WEBHOOK = "webhook"
        FILE = "file"
        ADMIN = "admin"
        COMMAND = "command"

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="decisions")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    verdict = models.CharField(max_length=8, choices=Verdict.choices)
    comment = models.TextField(blank=True)
    channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.WEB,
                               help_text="How the decision arrived.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(fields=["request", "reviewer"], name="one_decision_per_reviewer"),
            models.CheckConstraint(name="decision_comment_bounded",
                                   condition=LessThanOrEqual(Length("comment"), COMMENT_MAX_CHARS)),
        ]

    def __str__(self) -> str:
        return f"{self.verdict} on request {self.request_id}"


class ApprovedContent(models.Model):
    """The text a source held at a fingerprint someone approved: what the diff of a later
    content change is computed against. One per (source, fingerprint), kept when the
    first request for it is approved. `documents`: [{path, sha256, title, text}], text
    null past the size kept (the diff then names the file without its lines)."""

    source = models.ForeignKey(ReferenceSource, on_delete=models.CASCADE, related_name="+")
    fingerprint = models.CharField(max_length=64)
    documents = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "fingerprint"], name="approved_content_unique")]

    def __str__(self) -> str:
        return f"{self.source_id}@{self.fingerprint[:12]}"


# The channels' tables (webhooks) live in their own module; imported here so that the
# app's migrations and admin find them.
from approvals.channels import models as channel_models  # noqa: E402, F401
