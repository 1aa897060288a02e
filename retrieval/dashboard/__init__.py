"""The curator's dashboard pages this package serves: the agents (list, create with the
token shown once, edit scope, pins and profile, rotate and revoke) and the status page
(the model, the database, the queue, schedules, index sizes, disk; the reset). The
catalog and search pages are retrieval/views.py; the reviewer's pages approvals/views.py;
all share templates/base.html."""
