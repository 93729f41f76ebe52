"""Fixtures the store API tests share: the store objects of these tests belong
to group ``child`` of ``tree`` (root ⊃ child ⊃ grandchild, root ⊃ sibling)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.groupqueues.api_helpers import ADMIN, EDITOR, user_client


@pytest.fixture
def editor(tree: dict[str, Any]) -> APIClient:
    """A user client with the editor role on ``child``."""
    return user_client(tree["child"], EDITOR)


@pytest.fixture
def admin(tree: dict[str, Any]) -> APIClient:
    """A user client with the admin role on ``child``."""
    return user_client(tree["child"], ADMIN)
