"""Enrichment traces: the write and the retention purge (services.py), reads and a
trace's story for the pages (selectors.py; story.py, pure), the trace API (apis.py,
serializers.py: one shape per pass) and the traces pages (pages.py, forms.py)."""
