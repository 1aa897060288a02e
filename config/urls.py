from csp.constants import UNSAFE_INLINE
from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from config.health import HealthApi

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/health", HealthApi.as_view(), name="api-health"),
    path("api/v1/", include("retrieval.urls")),
    path("api/v1/", include("catalog.urls")),
    path("api/v1/", include("approvals.urls")),
    path("api/v1/", include("approvals.channels.urls")),
    path("api/v1/schema/", SpectacularAPIView.as_view(permission_classes=[]), name="api-schema"),
    # Swagger UI's start-up script from ?script, not inline: it runs under the whole policy.
    path("api/v1/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema", permission_classes=[]),
         name="api-docs"),
    # Redoc injects its styles as <style> elements at run time and searches in a blob:
    # worker: this page alone allows both (scripts stay 'self'; docs/deploying.md, "Security headers").
    path("api/v1/redoc/", csp_update({"style-src": [UNSAFE_INLINE], "worker-src": ["blob:"]})(
        SpectacularRedocView.as_view(url_name="api-schema", permission_classes=[])), name="api-redoc"),
    path("", include("catalog.page_urls")),
    path("", include("approvals.page_urls")),
    path("", include("retrieval.page_urls")),
]
