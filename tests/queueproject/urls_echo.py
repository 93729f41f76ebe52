"""The project's URLs plus a JSON echo endpoint to exercise parsing and errors."""

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


urlpatterns = [path("api/test-echo/", Echo.as_view()), *project_urls]
handler404 = "queueproject.exceptions.page_not_found"
handler500 = "queueproject.exceptions.server_error"
