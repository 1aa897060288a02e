"""The audit log: hash-chained entries the database refuses to change.

chain.py (pure): each entry's hash and the walk that finds the first broken link;
log.py: appending events under one lock (the chain never forks) and verifying the
stored chain; export.py: filtering entries and writing them as CSV or JSON.
"""
