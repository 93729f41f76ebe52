"""Errors of the principals layer (codes match the API contract)."""

from queueproject.exceptions import AlreadyExists, InvalidInput, NotFound, PermissionDenied


class GroupCycle(InvalidInput):
    """A group cannot be its own ancestor."""


class GroupNotEmpty(InvalidInput):
    """The group still has child groups or apps; move or delete them first."""


class SlugTaken(AlreadyExists):
    """That slug is already taken."""


class GroupNotFound(NotFound):
    """No such group."""


class AppNotFound(NotFound):
    """No such app."""


class UserNotFound(NotFound):
    """No such user."""


class TokenNotFound(NotFound):
    """No such token."""


class InvalidScope(InvalidInput):
    """Unknown scope."""


class InvalidRole(InvalidInput):
    """Unknown role."""


class RoleGrantDenied(PermissionDenied):
    """Only an owner may grant the owner role."""


class UsernameTaken(AlreadyExists):
    """A user with that username already exists."""
