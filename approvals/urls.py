from django.urls import path

from approvals import apis

urlpatterns = [
    path("approvals", apis.ApprovalListApi.as_view(), name="api-approvals"),
]
