"""Facts and memory, per agent and end user: reads (selectors.py) and writes
(services.py: set, store, erase), the API (apis.py, serializers.py) and the curator's
memory page (pages.py, forms.py); keywords.py makes a memory's keywords (pure)."""
