"""Writes of the principals layer. Each function is one transaction and takes
keyword-only arguments; errors are ``principals.exceptions``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from principals import exceptions as err
from principals.authz import Principal, may_grant_role
from principals.models import SLUG_VALIDATOR, ApiToken, App, Group, Membership, Role, Scope
from principals.tokens import PREFIX_LENGTH, hash_secret, new_secret


def _check_slug(slug: str) -> None:
    try:
        SLUG_VALIDATOR(slug)
    except ValidationError as exc:
        raise err.InvalidInput(
            f"Invalid slug {slug!r}: {exc.messages[0]}", details={"slug": exc.messages}
        ) from exc


def group_get(*, ref: str) -> Group:
    """The group by slug or id (raises GroupNotFound)."""
    try:
        return Group.objects.by_ref(ref)
    except Group.DoesNotExist as exc:
        raise err.GroupNotFound(f"No group {ref!r}.") from exc


def app_get(*, ref: str) -> App:
    """The app by slug or id (raises AppNotFound)."""
    try:
        return App.objects.select_related("group").by_ref(ref)
    except App.DoesNotExist as exc:
        raise err.AppNotFound(f"No app {ref!r}.") from exc


def _lock_parent_chain(parent: Group, moving: Group) -> None:
    """Refuse ``parent`` if it is ``moving`` or one of its descendants.

    Locks the ancestors of ``parent`` one by one (PostgreSQL) so that two
    concurrent re-parentings cannot together close a cycle; SQLite serialises
    writers anyway. Must run inside a transaction.
    """
    node: Group | None = Group.objects.select_for_update().get(pk=parent.pk)
    while node is not None:
        if node.pk == moving.pk:
            raise err.GroupCycle(
                f"Group {parent.slug!r} is {moving.slug!r} or one of its descendants."
            )
        node = Group.objects.select_for_update().get(pk=node.parent_id) if node.parent_id else None


@transaction.atomic
def group_create(*, slug: str, name: str = "", parent: Group | None = None) -> Group:
    """Create a group (raises SlugTaken, InvalidInput)."""
    _check_slug(slug)
    if Group.objects.filter(slug=slug).exists():
        raise err.SlugTaken(f"A group with slug {slug!r} already exists.")
    try:
        with transaction.atomic():
            return Group.objects.create(slug=slug, name=name or slug, parent=parent)
    except IntegrityError as exc:
        raise err.SlugTaken(f"A group with slug {slug!r} already exists.") from exc


@transaction.atomic
def group_set_parent(*, group: Group, parent: Group | None) -> Group:
    """Move ``group`` under ``parent`` (None: make it a root). Raises GroupCycle."""
    locked = Group.objects.select_for_update().get(pk=group.pk)
    if parent is not None:
        _lock_parent_chain(parent, locked)
    locked.parent = parent
    locked.save(update_fields=["parent"])
    group.parent = parent
    return locked


@transaction.atomic
def group_delete(*, group: Group) -> None:
    """Delete a group with no child groups and no apps (its collections and
    messages go with it). Raises GroupNotEmpty."""
    locked = Group.objects.select_for_update().get(pk=group.pk)
    if locked.children.exists() or locked.apps.exists():
        raise err.GroupNotEmpty(f"Group {locked.slug!r} still has child groups or apps.")
    locked.delete()


@transaction.atomic
def app_create(*, slug: str, group: Group, name: str = "") -> App:
    """Create an app in ``group`` (raises SlugTaken, InvalidInput)."""
    _check_slug(slug)
    if App.objects.filter(slug=slug).exists():
        raise err.SlugTaken(f"An app with slug {slug!r} already exists.")
    try:
        with transaction.atomic():
            return App.objects.create(slug=slug, name=name or slug, group=group)
    except IntegrityError as exc:
        raise err.SlugTaken(f"An app with slug {slug!r} already exists.") from exc


@transaction.atomic
def app_move(*, app: App, group: Group) -> App:
    """Move an app to another group."""
    app.group = group
    app.save(update_fields=["group"])  # save(), not update(): receivers follow moves
    return app


@transaction.atomic
def app_set_webhook(*, app: App, url: str, secret: str, timeout: float = 10.0) -> App:
    """Set the app's webhook endpoint (group-queue ``webhook`` handler, session
    ``webhook`` deliverer). Raises InvalidInput for a non-http(s) URL, an empty
    secret or a timeout outside 0.1-300 s."""
    details: dict[str, list[str]] = {}
    if not url.startswith(("http://", "https://")):
        details["url"] = ["Must be an http(s) URL."]
    if not secret:
        details["secret"] = ["Must not be empty."]
    if not 0.1 <= float(timeout) <= 300:
        details["timeout"] = ["Must be between 0.1 and 300 seconds."]
    if details:
        raise err.InvalidInput("Invalid webhook endpoint.", details=details)
    App.objects.filter(pk=app.pk).update(
        webhook_url=url, webhook_secret=secret, webhook_timeout=float(timeout)
    )
    app.webhook_url, app.webhook_secret, app.webhook_timeout = url, secret, float(timeout)
    return app


def user_get(*, username: str) -> Any:
    User = get_user_model()
    try:
        return User.objects.get(**{User.USERNAME_FIELD: username})
    except User.DoesNotExist as exc:
        raise err.UserNotFound(f"No user {username!r}.") from exc


@transaction.atomic
def user_create(*, username: str, password: str, email: str = "", staff: bool = False) -> Any:
    """A login for the admin and the API (roles come from ``membership_grant``);
    ``staff`` lets it into the admin. Raises UsernameTaken, InvalidInput (an
    empty username or a password the validators refuse)."""
    User = get_user_model()
    if not username.strip():
        raise err.InvalidInput("The username must not be empty.")
    if User.objects.filter(**{User.USERNAME_FIELD: username}).exists():
        raise err.UsernameTaken(f"User {username!r} already exists.")
    try:
        validate_password(password, User(**{User.USERNAME_FIELD: username, "email": email}))
    except ValidationError as exc:
        raise err.InvalidInput(" ".join(exc.messages)) from exc
    return User.objects.create_user(username, email=email, password=password, is_staff=staff)


def role_parse(name: str) -> Role:
    try:
        return Role.from_name(name)
    except ValueError as exc:
        raise err.InvalidRole(str(exc)) from exc


@transaction.atomic
def membership_grant(
    *, user: Any, group: Group, role: Role, by: Principal | None = None
) -> Membership:
    """Give ``user`` ``role`` on ``group`` (replacing an existing role there).

    ``by`` is the acting principal (None: trusted server-side code); it needs
    the manage-access capability, and only an owner grants owner.
    """
    if by is not None and not may_grant_role(by, group, role):
        raise err.RoleGrantDenied(f"You may not grant {role.label} on {group.slug!r}.")
    membership, _ = Membership.objects.update_or_create(
        user=user, group=group, defaults={"role": int(role)}
    )
    return membership


@transaction.atomic
def membership_revoke(*, user: Any, group: Group) -> bool:
    deleted, _ = Membership.objects.filter(user=user, group=group).delete()
    return bool(deleted)


def scopes_parse(raw: str | Iterable[str]) -> list[str]:
    """Validate a comma-separated (or iterable) list of scopes (raises InvalidScope)."""
    items = [s.strip() for s in (raw.split(",") if isinstance(raw, str) else raw) if s.strip()]
    known = {str(s) for s in Scope}
    unknown = [s for s in items if s not in known]
    if unknown:
        raise err.InvalidScope(
            f"Unknown scope(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}.",
            details={"scopes": unknown},
        )
    if not items:
        raise err.InvalidScope("At least one scope is required.")
    return sorted(set(items))


@transaction.atomic
def token_create(
    *,
    name: str,
    scopes: Iterable[str],
    user: Any = None,
    app: App | None = None,
    expires_in: int | None = None,
    expires_at: datetime | None = None,
) -> tuple[ApiToken, str]:
    """Create a token; returns it and the secret (shown once, never stored)."""
    if (user is None) == (app is None):
        raise err.InvalidInput("A token belongs to exactly one user or one app.")
    if expires_in is not None:
        if expires_in <= 0:
            raise err.InvalidInput("--expires-in must be a positive number of seconds.")
        expires_at = timezone.now() + timedelta(seconds=expires_in)
    secret = new_secret()
    token = ApiToken.objects.create(
        name=name or "token",
        user=user,
        app=app,
        scopes=scopes_parse(list(scopes)),
        prefix=secret[:PREFIX_LENGTH],
        secret_hash=hash_secret(secret),
        expires_at=expires_at,
    )
    return token, secret


def token_find(*, name_or_prefix: str) -> list[ApiToken]:
    """Live tokens whose prefix (or name) matches (raises TokenNotFound)."""
    live = ApiToken.objects.filter(revoked=False)
    tokens = list(live.filter(prefix=name_or_prefix)) or list(live.filter(name=name_or_prefix))
    if not tokens and len(name_or_prefix) >= 6:
        tokens = list(live.filter(prefix__startswith=name_or_prefix))
    if not tokens:
        raise err.TokenNotFound(f"No live token named or prefixed {name_or_prefix!r}.")
    return tokens


@transaction.atomic
def token_revoke(*, tokens: Iterable[ApiToken]) -> int:
    """Revoke the tokens (idempotent); returns how many were live."""
    ids = [t.pk for t in tokens]
    count = ApiToken.objects.filter(pk__in=ids, revoked=False).update(revoked=True)
    for t in tokens:
        t.revoked = True
    return count
