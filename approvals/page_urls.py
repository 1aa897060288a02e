from django.urls import path

from approvals import views

urlpatterns = [
    path("approvals/", views.queue, name="approvals-queue"),
    path("approvals/pending-count", views.pending_badge, name="approvals-pending-count"),
    path("approvals/bulk", views.bulk_decide, name="approvals-bulk"),
    path("approvals/<int:request_id>/", views.request_page, name="approvals-request"),
    path("approvals/<int:request_id>/decide", views.decide, name="approvals-decide"),
    path("approvals/<int:request_id>/revoke", views.revoke, name="approvals-revoke"),
    path("approvals/sources/<slug:catalog>/<slug:source>/", views.source_history, name="approvals-source-history"),
    path("approvals/agents/<int:agent_id>/", views.agent_history, name="approvals-agent-history"),
    path("audit/", views.audit_log, name="audit-log"),
    path("audit/export.<str:fmt>", views.audit_export, name="audit-export"),
]
