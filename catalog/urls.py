from django.urls import path

from catalog import apis

urlpatterns = [
    path("catalogs/<slug:slug>/reindex", apis.ReindexApi.as_view(), name="api-reindex"),
    path("index-runs/<int:pk>", apis.IndexRunApi.as_view(), name="api-index-run"),
    path("catalogs/<slug:slug>/ranking", apis.RankingApi.as_view(), name="api-ranking"),
    path("catalogs/<slug:slug>/sources", apis.SourcesApi.as_view(), name="api-sources"),
    path("catalogs/<slug:slug>/sources/<slug:source>", apis.SourceApi.as_view(), name="api-source"),
    path("catalogs/<slug:slug>/sources/<slug:source>/content", apis.SourceContentApi.as_view(),
         name="api-source-content"),
    path("catalogs/<slug:slug>/sources/<slug:source>/files", apis.SourceFilesApi.as_view(), name="api-source-files"),
]
