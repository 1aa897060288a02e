"""The curator's agent pages (pages.py, forms.py): the list, a new agent, one agent's
scope, pins and profile, rotating and revoking its token. catalog.agents writes."""
