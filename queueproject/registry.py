"""Registries of named Python callables, filled by decorators in installed apps.

Group-queue handlers and session-queue deliverers are both registered this way:
code registers a callable under a name; the admin and commands offer only
registered names (never an import path typed by a user). ``autodiscover()``
imports the registry's module (e.g. ``consumers``) of every installed app.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from django.utils.module_loading import autodiscover_modules

F = TypeVar("F", bound=Callable[..., Any])


class UnknownName(LookupError):
    pass


class Registry(Generic[F]):
    def __init__(self, kind: str, module_name: str):
        self.kind = kind
        self.module_name = module_name
        self._items: dict[str, F] = {}
        self._discovered = False

    def register(self, name: str | None = None) -> Callable[[F], F]:
        """Decorator: ``@registry.register("name")`` (default: the function's name)."""

        def decorator(func: F) -> F:
            key = name or func.__name__
            existing = self._items.get(key)
            if existing is not None and existing is not func:
                raise ValueError(f"{self.kind} {key!r} is already registered")
            self._items[key] = func
            return func

        return decorator

    def autodiscover(self) -> None:
        if not self._discovered:
            autodiscover_modules(self.module_name)
            self._discovered = True

    def get(self, name: str) -> F:
        self.autodiscover()
        try:
            return self._items[name]
        except KeyError:
            raise UnknownName(
                f"No registered {self.kind} {name!r}; known: {', '.join(self.names()) or 'none'}"
            ) from None

    def names(self) -> list[str]:
        self.autodiscover()
        return sorted(self._items)

    def choices(self) -> list[tuple[str, str]]:
        return [(n, n) for n in self.names()]
