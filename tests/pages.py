"""Reading the server-rendered pages in tests that do not need a browser."""

from __future__ import annotations

import re

FILTER_SLOT = re.compile(r'<span class="error filter-error" id="(\w+)_error" role="alert"'
                         r'( hx-swap-oob="true")?>([^<]*)</span>')


def filter_slots(html: str, *, out_of_band: bool = False) -> dict[str, str]:
    """Each list filter's error slot (templates/partials/filter_error.html) in `html`: the
    control's id -> its error text ('' when none); `out_of_band`: only the slots an htmx
    answer swaps in out of band."""
    return {control: text for control, oob, text in FILTER_SLOT.findall(html) if bool(oob) == out_of_band}
