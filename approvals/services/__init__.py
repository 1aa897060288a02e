"""Approvals' writes, one job per module. Each checks who may act (the roles are groups:
catalog.auth.is_curator / is_reviewer), writes in one transaction and appends what it
did to the audit log last (catalog.audit.log).

policies.py    policy_create / policy_update / policy_delete (curators)
requests.py    requests_raise (the gate's, idempotent and safe under concurrent read
               paths), request_raise (by hand)
decisions.py   request_decide: check_decide (roles, locks, state, four eyes), do_decide
revocation.py  approval_revoke (reviewers)
expiry.py      approvals_expire (the periodic task; the gate already refuses by timestamp)
contents.py    the text an approval covers, kept for later diffs; the diff of a change
lapse.py       approvals_lapse: inside a reindex's switch, approvals and requests of the
               old content lapse and new requests carry the diff
receivers.py   what catalog announces (catalog.signals), handed to the services above
"""
