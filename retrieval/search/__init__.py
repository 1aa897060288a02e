"""Search (`rag_search`): chunk_search fuses and hydrates (selectors.py) what exact BM25
in Postgres (lexical.py) and HNSW k-NN (vector.py) rank; the BM25 arithmetic and MaxScore
bounds (bm25.py) and rank fusion (fusion.py) are pure. The API (apis.py, serializers.py)
and the curator's playground (pages.py, forms.py, runs.py; highlight.py marks terms)."""
