"""DRF authentication for ``Authorization: Bearer <secret>`` and the request's principal."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from principals import sql
from principals.authz import Principal
from principals.models import ApiToken, App, Group
from principals.tokens import hash_secret
from queueproject import rawsql

LAST_USED_RESOLUTION = timedelta(seconds=60)


class AppIdentity:
    """``request.user`` for a request made with an app token (acts as the app)."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None

    def __init__(self, app: App):
        self.app = app

    def __str__(self) -> str:
        return f"app:{self.app.slug}"


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """Accepts ``Authorization: Bearer <secret>``; unknown, expired or revoked
    tokens (and tokens of inactive users) are refused with 401."""

    keyword = "bearer"

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid Authorization header.")
        try:
            secret = header[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Invalid token.") from exc
        return self.authenticate_secret(secret)

    def authenticate_secret(self, secret: str) -> tuple[Any, ApiToken]:
        token = token_with_owner(hash_secret(secret))
        now = timezone.now()
        if token is None or token.revoked or (token.expires_at and token.expires_at <= now):
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        if token.user is not None and not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        _touch(token, now)
        if token.user is not None:
            return token.user, token
        assert token.app is not None  # the token_has_one_owner constraint
        return AppIdentity(token.app), token

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="api"'


def token_with_owner(secret_hash: str) -> ApiToken | None:
    """The token of ``secret_hash`` with its user, or its app and the app's
    group, as ``select_related("user", "app__group")`` would give them, in one
    prepared statement: the ORM spent more CPU compiling that query than the
    rest of an enqueue's authentication (bench/README.md, issue 21)."""
    row = rawsql.fetch_one(sql.token_with_owner(), [secret_hash])
    if row is None:
        return None
    tokens, users, apps, groups = _readers()
    token = tokens.read(row, 0)
    assert token is not None
    at = tokens.width
    user = users.read(row, at)
    at += users.width
    app = apps.read(row, at)
    if app is not None:
        app.group = groups.read(row, at + apps.width)  # type: ignore[assignment]  # an app's group is never NULL
    token.user, token.app = user, app
    return token


@functools.cache
def _readers() -> tuple[
    rawsql.ModelReader[ApiToken], rawsql.ModelReader[Any], rawsql.ModelReader[App],
    rawsql.ModelReader[Group],
]:  # fmt: skip
    return (
        rawsql.ModelReader(ApiToken), rawsql.ModelReader(get_user_model()),
        rawsql.ModelReader(App), rawsql.ModelReader(Group),
    )  # fmt: skip


def _touch(token: ApiToken, now: Any) -> None:
    """Record last use, at most once a minute per token: a request whose token
    row (just read) was used within the minute writes nothing, and of the
    requests that find it older, the UPDATE's condition lets one write."""
    stale = now - LAST_USED_RESOLUTION
    if token.last_used_at is None or token.last_used_at < stale:
        ApiToken.objects.filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale), pk=token.pk
        ).update(last_used_at=now)
        token.last_used_at = now


def principal_of(request: Request) -> Principal:
    """The acting principal of a DRF request (cached on the request)."""
    cached: Principal | None = getattr(request, "_principal", None)
    if cached is not None:
        return cached
    auth = getattr(request, "auth", None)
    principal = (
        Principal.for_token(auth)
        if isinstance(auth, ApiToken)
        else Principal.for_user(request.user)
    )
    request._principal = principal  # type: ignore[attr-defined]  # a per-request cache
    return principal
