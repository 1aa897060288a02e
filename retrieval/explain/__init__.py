"""Explain ("why not this document?"): where one document stood in a search, stage by
stage, read from the ranking search itself builds (retrieval.search.selectors.chunk_ranking):
selectors.py reads it, serializers.py shapes the body and its sentences, apis.py is the
REST view."""
