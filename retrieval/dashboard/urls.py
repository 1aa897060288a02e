from django.urls import path

from retrieval.dashboard import status

urlpatterns = [
    path("status/", status.status_page, name="status-page"),
    path("status/reset", status.status_reset, name="status-reset"),
]
