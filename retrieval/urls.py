from django.urls import path

from retrieval import apis

urlpatterns = [
    path("search", apis.SearchApi.as_view(), name="api-search"),
    path("catalogs", apis.CatalogListApi.as_view(), name="api-catalogs"),
    path("status", apis.StatusApi.as_view(), name="api-status"),
]
