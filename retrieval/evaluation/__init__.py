"""Retrieval quality on BEIR data sets (`manage.py evaluate`): reading queries and qrels
and scoring runs (beir.py), and the metrics (metrics.py); pure."""
