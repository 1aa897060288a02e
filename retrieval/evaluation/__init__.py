"""Retrieval quality on BEIR data sets (`manage.py evaluate`, the API and the evaluation
pages): reading queries and qrels and scoring runs (beir.py) and the metrics (metrics.py),
pure; test sets (query_sets.py), runs in the worker (runs.py) and their reads
(selectors.py); the API (apis.py, serializers.py) and the pages (pages.py, forms.py)."""
