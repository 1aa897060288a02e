"""Conversations: a whole conversation enriched with facts, memory and context on its
newest user message (injection.py), and retrieved from per topic (search.py); their API
(apis.py, serializers.py: search_conversation and enrich_conversation). The facts and
memory themselves are retrieval.memory's."""
