"""What the gate concludes for one source and one caller, from the rule that governs the
source and the caller's requests for its current content (pure: no Django).

The database says which policies apply (the strictest of them is the `Rule`) and which
request is live (approved by enough reviewers, not expired, not revoked, for the content
as it is now): approvals.selectors computes both in one statement. This module turns
that into the answer a read path shows: allowed or withheld, which request to follow,
and why, and whether a new request must be raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

MISSING_REASON = "requires approval; no reviewer has approved it for this agent"
PEOPLE_REASON = "requires approval; approvals are granted to agents, not to people signed in"


@dataclass(frozen=True)
class Rule:
    """The strictest of the policies covering a source for one caller (the source's own
    `requires_approval` flag counts as a policy of one approval, forever). Matches are
    disclosed only where at least one policy covers the source and every one allows
    it: the flag alone never discloses, and says nothing against a policy that does."""

    required: int = 1
    lifetime: timedelta | None = None  # None: forever
    four_eyes: bool = False
    policy_ids: tuple[int, ...] = ()
    disclose_matches: bool = False


@dataclass(frozen=True)
class RequestState:
    """A request of the caller for the source's current fingerprint, as the gate read it."""

    id: int
    state: str
    approvals: int
    live: bool  # approved by `required` reviewers, not past its lifetime
    timed_out: bool  # its approval's lifetime is over (whatever the state column says yet)
    raised_via: str = ""  # "reindex": raised when the content changed under an approval or a request


@dataclass(frozen=True)
class Judgement:
    allowed: bool
    state: str  # not_required | approved | pending | rejected | revoked | expired | missing
    reason: str = ""
    request_id: int | None = None
    raise_request: bool = False  # a new request is due (an agent's first, or after an approval ended)
    previous_id: int | None = None  # the request a new one follows


NOT_REQUIRED = Judgement(allowed=True, state="not_required")


def judge(*, rule: Rule, requests: Sequence[RequestState], for_agent: bool) -> Judgement:
    """Allowed while a request is live; otherwise withheld, naming the request to follow
    (newest first in `requests`). A rejection or revocation stands for this content
    (nothing new is raised until it changes or someone asks by hand); an expired
    approval, or one short of approvals the policy now requires, calls for a new
    request, as does having none."""
    if not for_agent:
        return Judgement(allowed=False, state="missing", reason=PEOPLE_REASON)
    if (live := next((r for r in requests if r.live), None)) is not None:
        return Judgement(allowed=True, state="approved", request_id=live.id)
    if (pending := next((r for r in requests if r.state == "pending"), None)) is not None:
        progress = f" ({pending.approvals} of {rule.required} approvals)" if rule.required > 1 else ""
        changed = "; its content changed since it was last approved or requested" \
            if pending.raised_via == "reindex" else ""
        return Judgement(allowed=False, state="pending", request_id=pending.id,
                         reason=f"requires approval{changed}; request {pending.id} awaits a reviewer{progress}")
    latest = requests[0] if requests else None
    if latest is None:
        return Judgement(allowed=False, state="missing", reason=MISSING_REASON, raise_request=True)
    if latest.state == "rejected":
        return Judgement(allowed=False, state="rejected", request_id=latest.id,
                         reason=f"requires approval; request {latest.id} was rejected")
    if latest.state == "revoked":
        return Judgement(allowed=False, state="revoked", request_id=latest.id,
                         reason=f"requires approval; the approval of request {latest.id} was revoked")
    if latest.state == "expired" or (latest.state == "approved" and latest.timed_out):
        return Judgement(allowed=False, state="expired", request_id=latest.id, raise_request=True,
                         previous_id=latest.id,
                         reason=f"requires approval; the approval of request {latest.id} expired")
    if latest.state == "approved":  # short of what the policy requires now
        return Judgement(allowed=False, state="missing", request_id=latest.id, raise_request=True,
                         previous_id=latest.id,
                         reason=f"requires approval; request {latest.id} has {latest.approvals} of the "
                                f"{rule.required} approvals now required")
    # lapsed: the content went back to a fingerprint approved before; that approval ended
    return Judgement(allowed=False, state="missing", request_id=latest.id, raise_request=True,
                     previous_id=latest.id, reason=MISSING_REASON)
