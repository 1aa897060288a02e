from django.urls import path

from approvals.channels.webhooks import apis

urlpatterns = [
    path("approvals/<int:pk>/decision", apis.SignedDecisionApi.as_view(), name="api-approval-decision-signed"),
    path("catalogs/<slug:slug>/webhooks", apis.WebhookEndpointsApi.as_view(), name="api-webhook-endpoints"),
    path("catalogs/<slug:slug>/webhooks/deliveries", apis.WebhookDeliveriesApi.as_view(),
         name="api-webhook-deliveries"),
]
