"""Every list page's filters refuse a bad value beside the field it is about: a 400, the
message in the field's own error slot, the control marked invalid and described by it.
For the pages whose filters change the list in place, the htmx answer carries each
shown filter's slot out of band (static/js/lectern.js marks the controls to match), and
never a slot the page does not have (htmx would log that as a console error)."""

from __future__ import annotations

import re

import pytest

from tests.factories import person
from tests.pages import filter_slots

pytestmark = pytest.mark.django_db

# (path, role, bad query, the field's id, a word of its message, the list htmx swaps when
# the filters change it in place; None: the page is loaded again or swaps the filters too)
PAGES = [
    ("/catalogs/ops/", "curator", {"kind": "scroll"}, "id_kind", "valid choice", None),
    ("/catalogs/ops/runs/", "curator", {"status": "sleeping"}, "id_status", "valid choice", None),
    ("/agents/", "curator", {"catalog": "nope"}, "id_catalog", "valid choice", "agents-table"),
    ("/traces/", "curator", {"since": "2026-05-02", "until": "2026-05-01"}, "id_until", "before its start",
     "traces-table"),
    ("/evaluations/", "curator", {"status": "sleeping"}, "id_filter_status", "valid choice", "evaluation-history"),
    ("/approvals/", "reviewer", {"via": "pigeon"}, "id_via", "valid choice", "queue-table"),
    ("/audit/", "reviewer", {"since": "2026-05-02", "until": "2026-05-01"}, "id_until", "starts after it ends", None),
]


@pytest.mark.parametrize(("path", "role", "query", "control", "message", "target"), PAGES,
                         ids=[page[0] for page in PAGES])
def test_a_bad_filter_is_refused_beside_its_field(client_for, make_catalog, path, role, query, control, message,
                                                 target):
    make_catalog("ops")
    client = client_for(person("pat", role))

    page = client.get(path, query)
    html = page.content.decode()

    assert page.status_code == 400
    slots = filter_slots(html)
    assert message in slots.get(control, ""), slots
    assert [name for name, text in slots.items() if text] == [control]  # the others are empty
    tag = re.search(rf'<(?:input|select)[^>]*\bid="{control}"[^>]*>', html)
    assert tag and 'aria-invalid="true"' in tag.group() and f'aria-describedby="{control}_error"' in tag.group()
    assert 'class="alert"' not in html  # not a list of errors away from the fields

    if target:
        htmx = {"HX-Request": "true", "HX-Target": target}
        refused = client.get(path, query, headers=htmx)
        answer = refused.content.decode()
        assert refused.status_code == 400 and "<html" not in answer
        oob = filter_slots(answer, out_of_band=True)
        assert set(oob) == set(slots) and message in oob[control]  # every slot the page shows, and no other
        fixed = client.get(path, headers=htmx).content.decode()
        assert not any(filter_slots(fixed).values())  # a good filter empties them again
