"""DRF authentication for ``Authorization: Bearer <secret>`` and the request's principal."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from principals.authz import Principal
from principals.models import ApiToken, App
from principals.tokens import hash_secret

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
        # get(), not first(): the hash is unique, and first()'s ORDER BY costs
        # a fifth of this lookup's CPU on every request (its SQL compilation).
        try:
            token = ApiToken.objects.select_related("user", "app__group").get(
                secret_hash=hash_secret(secret)
            )
        except ApiToken.DoesNotExist:
            token = None
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
