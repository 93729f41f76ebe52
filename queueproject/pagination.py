"""The one pagination style of the API: {"count", "next", "previous", "results"}."""

from typing import Any

from rest_framework.pagination import PageNumberPagination

from queueproject.exceptions import InvalidInput


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request: Any) -> int:
        """``page_size`` must be a positive integer when given (400 otherwise,
        rather than silently using the default); capped at ``max_page_size``."""
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not raw.isdigit() or int(raw) < 1:
            raise InvalidInput(details={"page_size": ["Must be a positive integer."]})
        return min(int(raw), self.max_page_size)
