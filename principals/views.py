from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import generics

from principals.authentication import principal_of
from principals.authz import readable_groups
from principals.serializers import GroupSerializer
from queueproject.schema import ERROR_RESPONSES


@extend_schema(responses={200: GroupSerializer(many=True), **ERROR_RESPONSES})
class GroupListView(generics.ListAPIView):
    """Groups whose queues the principal can read."""

    serializer_class = GroupSerializer

    def get_queryset(self) -> Any:
        return readable_groups(principal_of(self.request))
