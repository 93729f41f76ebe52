"""Principals: the group tree, apps, memberships and API tokens (SPEC §1)."""

from __future__ import annotations

import re
import uuid
from typing import ClassVar, TypeVar

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

SLUG_VALIDATOR = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$",
    "Use 1-64 lowercase letters, digits and hyphens (no leading or trailing hyphen).",
)


class Role(models.IntegerChoices):
    """Roles in increasing power; a role on a group applies to its subtree."""

    VIEWER = 10, "viewer"
    EDITOR = 20, "editor"
    ADMIN = 30, "admin"
    OWNER = 40, "owner"

    @classmethod
    def from_name(cls, name: str) -> Role:
        for role in cls:
            if role.label == name.strip().lower():
                return role
        raise ValueError(f"unknown role {name!r}; choose one of {', '.join(cls.names_lower())}")

    @classmethod
    def names_lower(cls) -> list[str]:
        return [str(role.label) for role in cls]


class Scope(models.TextChoices):
    QUEUE_READ = "queue:read"
    QUEUE_WRITE = "queue:write"
    QUEUE_CONSUME = "queue:consume"
    QUEUE_ADMIN = "queue:admin"
    SESSION_READ = "session:read"
    SESSION_WRITE = "session:write"
    SESSION_CONSUME = "session:consume"
    SCRIPT_WRITE = "script:write"
    METRICS_READ = "metrics:read"


SLUG_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")


_M = TypeVar("_M", bound=models.Model)


class RefQuerySet(models.QuerySet[_M]):
    """Lookup by "slug or id", as URLs and commands address groups and apps."""

    def by_ref(self, ref: object) -> _M:
        """The row whose UUID id or slug is ``ref`` (raises ``DoesNotExist``;
        a malformed reference is simply not found, never a database error)."""
        text = str(ref)
        try:
            return self.get(id=uuid.UUID(text))
        except ValueError:
            pass
        if not SLUG_PATTERN.match(text):
            # The stubs give DoesNotExist to each concrete model, not to a bound TypeVar's.
            raise self.model.DoesNotExist(f"malformed reference {text!r}")  # type: ignore[attr-defined]
        return self.get(slug=text)


class GroupQuerySet(RefQuerySet["Group"]):
    pass


class AppQuerySet(RefQuerySet["App"]):
    pass


class Group(models.Model):
    """A node of the group tree. Deleting one with children or apps is refused
    (PROTECT); its collections and their messages go with it (CASCADE)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.SlugField(max_length=64, unique=True, validators=[SLUG_VALIDATOR])
    name = models.CharField(max_length=200)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = GroupQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]
        constraints: ClassVar = [
            models.CheckConstraint(
                condition=~models.Q(parent=models.F("id")), name="group_not_own_parent"
            ),
        ]

    def __str__(self) -> str:
        return self.path

    def ancestors(self, *, include_self: bool = True) -> list[Group]:
        """This group and its ancestors, nearest first (one query per level)."""
        chain: list[Group] = [self] if include_self else []
        node = self.parent
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain

    @property
    def path(self) -> str:
        return "/".join(g.slug for g in reversed(self.ancestors()))


class App(models.Model):
    """An application that belongs to a group; its chain is its group and the
    group's ancestors."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.SlugField(max_length=64, unique=True, validators=[SLUG_VALIDATOR])
    name = models.CharField(max_length=200)
    group = models.ForeignKey(Group, on_delete=models.PROTECT, related_name="apps")
    # The app's HTTP endpoint for deliveries (session prompts, queue messages),
    # signed with HMAC-SHA256 under webhook_secret (see queueproject.webhooks).
    webhook_url = models.URLField(max_length=500, blank=True)
    webhook_secret = models.CharField(max_length=200, blank=True)
    webhook_timeout = models.FloatField(default=10.0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AppQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="memberships")
    role = models.PositiveSmallIntegerField(choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["group__slug", "user_id"]
        constraints: ClassVar = [
            models.UniqueConstraint(fields=["user", "group"], name="membership_unique"),
            models.CheckConstraint(
                condition=models.Q(role__in=[r.value for r in Role]), name="membership_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} is {Role(self.role).label} of {self.group.slug}"


class ApiToken(models.Model):
    """A bearer token of a user or an app. Only a SHA-256 of the secret is kept;
    ``prefix`` (the first characters of the secret) identifies it in listings."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=100)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="api_tokens",
    )
    app = models.ForeignKey(
        App, null=True, blank=True, on_delete=models.CASCADE, related_name="api_tokens"
    )
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    secret_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        constraints: ClassVar = [
            models.CheckConstraint(
                condition=(
                    models.Q(user__isnull=False, app__isnull=True)
                    | models.Q(user__isnull=True, app__isnull=False)
                ),
                name="token_has_one_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def owner_label(self) -> str:
        return f"app:{self.app.slug}" if self.app is not None else f"user:{self.user_id}"


class RateCounter(models.Model):
    """Fixed-window request counters for throttling (one row per key and window),
    incremented by an atomic upsert so concurrent requests count correctly."""

    key = models.CharField(max_length=200)
    window_start = models.BigIntegerField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints: ClassVar = [
            models.UniqueConstraint(fields=["key", "window_start"], name="ratecounter_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.key}@{self.window_start}: {self.count}"
