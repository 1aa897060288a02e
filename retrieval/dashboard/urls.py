from django.urls import path

from retrieval.dashboard import agents, playground, status, traces

urlpatterns = [
    path("agents/", agents.agent_list, name="agents-list"),
    path("agents/new", agents.agent_new, name="agents-new"),
    path("agents/pins", agents.agent_pins, name="agents-pins"),
    path("agents/<int:agent_id>/", agents.agent_page, name="agents-page"),
    path("agents/<int:agent_id>/rotate", agents.agent_rotate, name="agents-rotate"),
    path("agents/<int:agent_id>/revoke", agents.agent_revoke, name="agents-revoke"),
    path("status/", status.status_page, name="status-page"),
    path("status/reset", status.status_reset, name="status-reset"),
    path("playground/", playground.playground, name="playground"),
    path("traces/", traces.trace_list, name="traces-list"),
    path("traces/<uuid:trace_id>/", traces.trace_page, name="traces-page"),
]
