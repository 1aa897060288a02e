"""Search (`rag_search`): chunk_search and its SQL, BM25 in Postgres and HNSW k-NN, fused
(selectors.py); the BM25 arithmetic and MaxScore bounds (bm25.py) and rank fusion
(fusion.py) are pure."""
