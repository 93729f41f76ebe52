"""Errors of the schedules (SPEC §6). The DRF exception handler in
``queueproject.exceptions`` maps them to the error envelope."""

from __future__ import annotations

from queueproject.exceptions import AlreadyExists, DomainError, InvalidInput, NotFound


class ScheduleError(DomainError):
    """The schedule operation could not be carried out."""


class InvalidSchedule(ScheduleError, InvalidInput):
    """The request is not valid."""

    @classmethod
    def field(cls, name: str, problem: str) -> InvalidSchedule:
        """An error about one field (``details`` maps it to its problems)."""
        return cls(f"{name}: {problem}", details={name: [problem]})


class ScheduleNotFound(ScheduleError, NotFound):
    """No such schedule."""

    code = "schedule_not_found"


class ScheduleExists(ScheduleError, AlreadyExists):
    """The group already has a schedule with that name."""
