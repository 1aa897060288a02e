"""The curator's pages this package serves, each feature's (its `pages` module), and
the front door (views.home). The catalog pages are catalog/views.py, the reviewer's
approvals/views.py; all share templates/base.html."""

from django.urls import path

from retrieval import views
from retrieval.agents import pages as agents
from retrieval.citations import pages as citations
from retrieval.evaluation import pages as evaluation
from retrieval.evaluation import tuning_pages as tuning
from retrieval.explain import pages as explain
from retrieval.memory import pages as memory
from retrieval.search import pages as search
from retrieval.status import pages as status
from retrieval.traces import pages as traces

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
    path("evaluations/", evaluation.evaluation_list, name="evaluations-list"),
    path("evaluations/start", evaluation.evaluation_start, name="evaluations-start"),
    path("evaluations/<int:run_id>/", evaluation.evaluation_page, name="evaluations-run"),
    path("evaluations/<int:run_id>/compare", evaluation.evaluation_compare, name="evaluations-compare"),
    path("tuning/", tuning.tuning_list, name="tuning-list"),
    path("tuning/start", tuning.tuning_start, name="tuning-start"),
    path("tuning/<int:run_id>/", tuning.tuning_page, name="tuning-run"),
    path("tuning/<int:run_id>/apply", tuning.tuning_apply_view, name="tuning-apply"),
    path("status/", status.status_page, name="status-page"),
    path("status/reset", status.status_reset, name="status-reset"),
    path("playground/", search.playground, name="playground"),
    path("playground/why-not", explain.why_not, name="playground-why-not"),
    path("playground/why-not/documents", explain.why_not_documents, name="playground-why-not-documents"),
    path("traces/", traces.trace_list, name="traces-list"),
    path("traces/<uuid:trace_id>/", traces.trace_page, name="traces-page"),
    path("cite/", citations.cite_page, name="traces-cite"),
    path("", views.home, name="home"),
]
