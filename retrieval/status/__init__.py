"""What this deployment is doing: the status report (selectors.py), GET /api/v1/status
and the reset (apis.py, serializers.py), and the status page (pages.py). The reset
itself is retrieval.runtime's, which every process follows."""
