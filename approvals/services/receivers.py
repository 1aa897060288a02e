"""What catalog announces (catalog.signals), handed to approvals' services. Catalog
cannot import approvals (it is the floor approvals stands on), so it sends and
approvals listens: ApprovalsConfig.ready connects this. It only translates the
signal's arguments into a service call; the work and its rules are the service's."""

from __future__ import annotations

from typing import Any

from approvals.services.lapse import approvals_lapse
from catalog.models import ReferenceSource


def on_content_switched(sender: type[ReferenceSource], *, source_id: int, old_fingerprint: str,
                        new_fingerprint: str, **kwargs: Any) -> None:
    approvals_lapse(source_id=source_id, new_fingerprint=new_fingerprint)


def connect() -> None:
    from catalog.signals import content_switched

    content_switched.connect(on_content_switched, dispatch_uid="approvals-lapse")
