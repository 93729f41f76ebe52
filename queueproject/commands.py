"""Shared scaffolding for management commands: domain errors become a clear
message on stderr and a non-zero exit (CommandError)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from queueproject.exceptions import DomainError


class ServiceCommand(BaseCommand):
    """A thin command: subclasses implement ``run`` and call services."""

    def handle(self, *args: Any, **options: Any) -> str | None:
        try:
            return self.run(*args, **options)
        except DomainError as exc:
            raise CommandError(exc.message) from exc

    def run(self, *args: Any, **options: Any) -> str | None:  # pragma: no cover - abstract
        raise NotImplementedError


def positive_int(value: str) -> int:
    """argparse type: an integer > 0."""
    import argparse

    try:
        number = int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from exc
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be greater than 0")
    return number
