from django.conf import settings
from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerView,
)

from queueproject import health
from queueproject.exceptions import api_not_found
from queueproject.metrics_views import MetricsView

handler404 = "queueproject.exceptions.page_not_found"
handler500 = "queueproject.exceptions.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path(
        "api/redoc/",
        SpectacularRedocView.as_view(url_name="schema", template_name="queueproject/redoc.html"),
        name="redoc",
    ),
    *[path("api/", include(urlconf)) for urlconf in settings.API_URLCONFS],
    # Anything else under /api/ is the JSON 404 envelope (also with DEBUG on).
    re_path(r"^api/", api_not_found),
    # Observability (docs/observability.md): probes and the Prometheus scrape.
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", MetricsView.as_view(), name="metrics"),
]

# "/" is the admin (its index shows the queue overview); the API lives under /api/.
urlpatterns += [path("", RedirectView.as_view(pattern_name="admin:index"), name="home")]
