from django.urls import path

from retrieval.dashboard import agents, evaluations, memory, playground, status, traces

urlpatterns = [
    path("agents/", agents.agent_list, name="agents-list"),
    path("agents/new", agents.agent_new, name="agents-new"),
    path("agents/pins", agents.agent_pins, name="agents-pins"),
    path("agents/<int:agent_id>/", agents.agent_page, name="agents-page"),
    path("agents/<int:agent_id>/rotate", agents.agent_rotate, name="agents-rotate"),
    path("agents/<int:agent_id>/revoke", agents.agent_revoke, name="agents-revoke"),
    path("agents/<int:agent_id>/memory/", memory.agent_memory, name="agents-memory"),
    path("agents/<int:agent_id>/memory/export", memory.agent_memory_export, name="agents-memory-export"),
    path("agents/<int:agent_id>/memory/erase", memory.agent_memory_erase, name="agents-memory-erase"),
    path("evaluations/", evaluations.evaluation_list, name="evaluations-list"),
    path("evaluations/start", evaluations.evaluation_start, name="evaluations-start"),
    path("evaluations/<int:run_id>/", evaluations.evaluation_page, name="evaluations-run"),
    path("evaluations/<int:run_id>/compare", evaluations.evaluation_compare, name="evaluations-compare"),
    path("status/", status.status_page, name="status-page"),
    path("status/reset", status.status_reset, name="status-reset"),
    path("playground/", playground.playground, name="playground"),
    path("traces/", traces.trace_list, name="traces-list"),
    path("traces/<uuid:trace_id>/", traces.trace_page, name="traces-page"),
]
