from django.urls import path

from catalog import views

urlpatterns = [
    path("catalogs/", views.catalog_list, name="catalogs-list"),
    path("catalogs/new", views.catalog_new, name="catalogs-create"),
    path("catalogs/tags/suggest", views.tag_suggest, name="catalogs-tag-suggest"),
    path("catalogs/tags/chips", views.tag_chips, name="catalogs-tag-chips"),
    path("catalogs/glob-preview", views.glob_preview, name="catalogs-glob-preview"),
    path("catalogs/<slug:catalog>/", views.catalog_page, name="catalogs-detail"),
    path("catalogs/<slug:catalog>/edit", views.catalog_edit, name="catalogs-edit"),
    path("catalogs/<slug:catalog>/delete", views.catalog_remove, name="catalogs-delete"),
    path("catalogs/<slug:catalog>/ranking", views.catalog_ranking, name="catalogs-ranking"),
    path("catalogs/<slug:catalog>/reindex", views.catalog_reindex, name="catalogs-reindex"),
    path("catalogs/<slug:catalog>/activity", views.catalog_activity, name="catalogs-activity"),
    path("catalogs/<slug:catalog>/runs/", views.catalog_runs, name="catalogs-runs"),
    path("catalogs/<slug:catalog>/runs/<int:run_id>/", views.run_page, name="catalogs-run"),
    path("catalogs/<slug:catalog>/sources/new", views.source_new, name="catalogs-source-create"),
    path("catalogs/<slug:catalog>/sources/<slug:source>/", views.source_page, name="catalogs-source"),
    path("catalogs/<slug:catalog>/sources/<slug:source>/edit", views.source_edit, name="catalogs-source-edit"),
    path("catalogs/<slug:catalog>/sources/<slug:source>/delete", views.source_remove, name="catalogs-source-delete"),
    path("catalogs/<slug:catalog>/sources/<slug:source>/reindex", views.source_reindex,
         name="catalogs-source-reindex"),
    path("catalogs/<slug:catalog>/sources/<slug:source>/files", views.source_upload, name="catalogs-source-files"),
    path("catalogs/<slug:catalog>/sources/<slug:source>/files/delete", views.source_file_delete,
         name="catalogs-source-file-delete"),
]
