"""What approvals announces to the channels built on it (the webhook and file channels,
the web queue's live parts): `audited`, sent once the transaction that appended them
commits, with the new AuditEntry rows (`entries`), in order. Every governance event is
audited (request raised, approved or rejected, approval recorded, revoked, expired,
lapsed, policy and source changes, token issues), so a channel subscribes here and
filters by `entry.action` rather than each service growing its own hook.

Receivers run after the commit (`transaction.on_commit`, robust) and through
`send_robust`: a channel failing never undoes or fails the decision it was told about;
its error is logged. A receiver that does real work enqueues a django-q2 task."""

from __future__ import annotations

import logging

from django.dispatch import Signal

logger = logging.getLogger(__name__)

audited = Signal()
