"""The project's URLs plus a JSON echo endpoint to exercise parsing and errors."""

from django.http import JsonResponse
from django.urls import path
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from queueproject.urls import urlpatterns as project_urls


class Echo(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list = []
    throttle_classes: list = []

    def post(self, request):
        return Response({"data": request.data})


def plain(request):
    """A plain Django view (not CSRF-exempt, as DRF's views are)."""
    return JsonResponse({"ok": True})


urlpatterns = [
    path("api/test-echo/", Echo.as_view()),
    path("api/test-plain/", plain),
    path("test-plain/", plain),
    *project_urls,
]
handler404 = "queueproject.exceptions.page_not_found"
handler500 = "queueproject.exceptions.server_error"
