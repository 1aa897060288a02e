from django.urls import path

from catalog import apis

urlpatterns = [
    path("catalogs/<slug:slug>/reindex", apis.ReindexApi.as_view(), name="api-reindex"),
    path("index-runs/<int:pk>", apis.IndexRunApi.as_view(), name="api-index-run"),
]
