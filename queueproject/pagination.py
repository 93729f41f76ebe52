"""The one pagination style of the API: {"count", "next", "previous", "results"}."""

from collections.abc import Sequence
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.views import APIView

from queueproject.exceptions import InvalidInput

_M = TypeVar("_M", bound=Model)
_Row = TypeVar("_Row")


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request: Any) -> int:
        """``page_size`` must be a positive integer when given (400 otherwise,
        rather than silently using the default); capped at ``max_page_size``."""
        size = _positive_int(request, self.page_size_query_param)
        return self.page_size if size is None else min(size, self.max_page_size)

    @classmethod
    def schema(cls, name: str) -> dict[str, Any]:
        """The OpenAPI schema of the query parameter ``name`` (what is accepted:
        a page_size above max_page_size is capped, not refused)."""
        return {"type": "integer", "minimum": 1}

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"] = self.schema(parameter["name"])
        return parameters

    def get_page_number(self, request: Any, paginator: Any) -> int:
        """``page`` must be a positive integer when given (400 otherwise); a page
        past the end is 404 (DRF's "Invalid page.")."""
        return _positive_int(request, self.page_query_param) or 1

    def paginate_queryset(
        self,
        queryset: QuerySet[_M, _Row] | Sequence[_Row],
        request: Request,
        view: APIView | None = None,
    ) -> list[_Row]:
        """The requested page's items: never None, as DRF's is when there is no
        page size (``get_page_size`` always answers one)."""
        page = super().paginate_queryset(queryset, request, view)
        assert page is not None
        return page


def _positive_int(request: Any, name: str) -> int | None:
    """The query parameter ``name`` (its one value) as a positive integer, None
    when absent; InvalidInput when empty, repeated or not a positive integer."""
    values = request.query_params.getlist(name)
    if not values:
        return None
    if len(values) > 1 or not values[0].isdigit() or int(values[0]) < 1:
        raise InvalidInput(details={name: ["Must be one positive integer."]})
    return int(values[0])
