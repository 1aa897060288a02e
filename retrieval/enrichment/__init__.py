"""Enrichment: the passes over a prompt or a tool result (pipeline.py), who asks and with
which profile (caller.py), listReferences / selectReferences and reading a reference's
files (references.py), what an agent has selected (selections.py), its startup
instructions (instructions.py); the per-catalog detection index, with mention and link
extraction beside it (detection.py), the reference graph discovery walks (discovery.py)
and a reference's files (reference_files.py); and, pure, the tag matcher (tagmatch.py)
and the injected text formats, with the signer that signs them (formatting.py). The
API: apis.py, serializers.py. Traces are retrieval.traces'."""
