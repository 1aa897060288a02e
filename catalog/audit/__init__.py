"""The audit log: hash-chained entries the database refuses to change.

chain.py (pure): each entry's hash and the walk that finds the first broken link;
anchors.py (pure): checkpoints of the chain's head, signed, and what contradicts them;
checkpoints.py: writing and reading them as files outside the database;
log.py: appending events under one lock (the chain never forks) and verifying the
stored chain against itself and the checkpoints; export.py: filtering entries and
writing them as CSV or JSON.
"""
