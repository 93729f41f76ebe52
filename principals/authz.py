"""The one capability check: "may principal P do capability C on target T?".

Views (through DRF permission classes), the admin, services and commands all
ask :func:`has_capability`. It fails closed: an unknown capability, an inactive
user, a revoked/expired token or a principal without a role answers False.

Rules (SPEC §1):
- users act with their effective role on the target group (the highest role
  held on the group or any ancestor); a user token additionally needs one of
  the capability's scopes; a session-login user is not narrowed by scopes;
- app tokens act as their app and need one of the capability's app scopes; for
  queue capabilities the app must sit in the owning group's subtree, for session
  capabilities the target must be the token's own app;
- superusers may do everything.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Max

from principals.models import ApiToken, App, Group, Membership, Role, Scope


class Capability(enum.StrEnum):
    QUEUE_READ = "queue.read"
    QUEUE_ENQUEUE = "queue.enqueue"
    QUEUE_CONSUME = "queue.consume"
    QUEUE_MANAGE = "queue.manage"
    GROUP_MANAGE_ACCESS = "group.manage_access"
    SESSION_CREATE = "session.create"
    SESSION_READ = "session.read"
    SESSION_EDIT = "session.edit"
    SESSION_CONSUME = "session.consume"
    TASK_ADMIN = "task.admin"


class AppReach(enum.Enum):
    NONE = "none"  # app tokens never have it
    SUBTREE = "subtree"  # the token's app is in the target group's subtree
    OWN_APP = "own_app"  # the target is the token's own app


@dataclass(frozen=True)
class Rule:
    min_role: Role
    user_scopes: frozenset[str]
    app_scopes: frozenset[str] = frozenset()
    app_reach: AppReach = AppReach.NONE


def _s(*scopes: Scope) -> frozenset[str]:
    return frozenset(str(s) for s in scopes)


RULES: dict[Capability, Rule] = {
    Capability.QUEUE_READ: Rule(
        Role.VIEWER, _s(Scope.QUEUE_READ), _s(Scope.QUEUE_READ), AppReach.SUBTREE
    ),
    Capability.QUEUE_ENQUEUE: Rule(
        Role.EDITOR,
        _s(Scope.QUEUE_WRITE),
        _s(Scope.QUEUE_WRITE, Scope.SCRIPT_WRITE),
        AppReach.SUBTREE,
    ),
    Capability.QUEUE_CONSUME: Rule(
        Role.EDITOR, _s(Scope.QUEUE_CONSUME), _s(Scope.QUEUE_CONSUME), AppReach.SUBTREE
    ),
    Capability.QUEUE_MANAGE: Rule(Role.ADMIN, _s(Scope.QUEUE_ADMIN)),
    Capability.GROUP_MANAGE_ACCESS: Rule(Role.ADMIN, _s(Scope.QUEUE_ADMIN)),
    Capability.SESSION_CREATE: Rule(
        Role.EDITOR, _s(Scope.SESSION_WRITE), _s(Scope.SESSION_WRITE), AppReach.OWN_APP
    ),
    Capability.SESSION_READ: Rule(
        Role.VIEWER, _s(Scope.SESSION_READ), _s(Scope.SESSION_READ), AppReach.OWN_APP
    ),
    Capability.SESSION_EDIT: Rule(
        Role.EDITOR, _s(Scope.SESSION_WRITE), _s(Scope.SESSION_WRITE), AppReach.OWN_APP
    ),
    Capability.SESSION_CONSUME: Rule(
        Role.EDITOR, _s(Scope.SESSION_CONSUME), _s(Scope.SESSION_CONSUME), AppReach.OWN_APP
    ),
    Capability.TASK_ADMIN: Rule(Role.ADMIN, _s(Scope.SESSION_WRITE)),
}

QUEUE_CAPABILITIES = (
    Capability.QUEUE_READ,
    Capability.QUEUE_ENQUEUE,
    Capability.QUEUE_CONSUME,
    Capability.QUEUE_MANAGE,
)
SESSION_CAPABILITIES = (
    Capability.SESSION_READ,
    Capability.SESSION_CREATE,
    Capability.SESSION_EDIT,
    Capability.SESSION_CONSUME,
    Capability.TASK_ADMIN,
)


@dataclass(eq=False)
class Principal:
    """Who is acting: a user (through a session login or a user token) or an app
    (through an app token). ``scopes`` is None when not narrowed (session login,
    server-side code acting for a user)."""

    user: AbstractBaseUser | None = None
    app: App | None = None
    token: ApiToken | None = None
    scopes: frozenset[str] | None = None
    _roles: dict[Any, int | None] = field(default_factory=dict, repr=False)

    @classmethod
    def for_user(cls, user: AbstractBaseUser | AnonymousUser | None) -> Principal:
        if user is None or not user.is_authenticated:
            return cls()
        return cls(user=user)

    @classmethod
    def for_token(cls, token: ApiToken) -> Principal:
        return cls(user=token.user, app=token.app, token=token, scopes=frozenset(token.scopes))

    @property
    def is_authenticated(self) -> bool:
        if self.app is not None:
            return True
        return self.user is not None and bool(self.user.is_active)

    @property
    def is_superuser(self) -> bool:
        return (
            self.app is None
            and self.user is not None
            and bool(self.user.is_active)
            and bool(getattr(self.user, "is_superuser", False))
        )

    @property
    def label(self) -> str:
        """``user:<id>`` or ``app:<slug>``: what ``enqueued_by`` / ``queued_by`` record."""
        if self.app is not None:
            return f"app:{self.app.slug}"
        if self.user is not None:
            return f"user:{self.user.pk}"
        return "anonymous"

    def has_scope(self, allowed: frozenset[str]) -> bool:
        return self.scopes is None or bool(self.scopes & allowed)

    def role_on(self, group: Group) -> Role | None:
        """The user's effective role on ``group`` (highest on it or an ancestor)."""
        if self.user is None or self.app is not None:
            return None
        if group.pk not in self._roles:
            ids = [g.pk for g in group.ancestors()]
            # By id: the user model is pluggable (AbstractBaseUser), the FK's static type is not.
            best = Membership.objects.filter(user_id=self.user.pk, group_id__in=ids).aggregate(
                best=Max("role")
            )["best"]
            self._roles[group.pk] = best
        value = self._roles[group.pk]
        return Role(value) if value is not None else None


def app_in_subtree(app: App, group: Group) -> bool:
    """True when ``app`` belongs to ``group`` or one of its descendants (walks
    up from the app's group and stops at ``group``: a query per level above)."""
    node: Group | None = app.group
    while node is not None:
        if node.pk == group.pk:
            return True
        node = node.parent
    return False


def has_capability(principal: Principal, capability: Capability, target: Group | App) -> bool:
    """May ``principal`` exercise ``capability`` on ``target``?

    ``target`` is the owning group for queue and group capabilities and the
    task's app for session capabilities. Never raises for unknown input; answers
    False instead (fail closed).
    """
    rule = RULES.get(capability)
    if rule is None or not principal.is_authenticated:
        return False
    if principal.is_superuser and principal.scopes is None:
        return True
    if principal.app is not None:
        return _app_may(principal, rule, target)
    group = target.group if isinstance(target, App) else target
    if principal.is_superuser:
        return principal.has_scope(rule.user_scopes)
    role = principal.role_on(group)
    return role is not None and role >= rule.min_role and principal.has_scope(rule.user_scopes)


def _app_may(principal: Principal, rule: Rule, target: Group | App) -> bool:
    assert principal.app is not None
    if not (principal.scopes and principal.scopes & rule.app_scopes):
        return False
    if rule.app_reach is AppReach.SUBTREE:
        group = target.group if isinstance(target, App) else target
        return app_in_subtree(principal.app, group)
    if rule.app_reach is AppReach.OWN_APP:
        return isinstance(target, App) and target.pk == principal.app.pk
    return False


def can_see_queues(principal: Principal, group: Group) -> bool:
    """Whether the group's queues exist for this principal (any queue capability).
    Where this is False, the API answers 404 rather than 403."""
    return any(has_capability(principal, c, group) for c in QUEUE_CAPABILITIES)


def can_see_app_sessions(principal: Principal, app: App) -> bool:
    """Whether the app's tasks and sessions exist for this principal."""
    return any(has_capability(principal, c, app) for c in SESSION_CAPABILITIES)


def may_grant_role(principal: Principal, group: Group, role: Role) -> bool:
    """Admins manage memberships; only an owner (or a superuser) grants owner."""
    if not has_capability(principal, Capability.GROUP_MANAGE_ACCESS, group):
        return False
    if role >= Role.OWNER and not principal.is_superuser:
        return principal.role_on(group) == Role.OWNER
    return True


def readable_groups(principal: Principal) -> list[Group]:
    """Groups whose queues the principal can read, ordered by slug.

    Users: every group in the subtree of a group they hold a role on (all for
    superusers). App tokens with ``queue:read``: the app's chain.
    """
    if principal.app is not None:
        if not principal.has_scope(RULES[Capability.QUEUE_READ].app_scopes):
            return []
        return sorted(principal.app.group.ancestors(), key=lambda g: g.slug)
    user = principal.user
    if user is None or not user.is_active:  # not authenticated
        return []
    if principal.scopes is not None and not principal.has_scope(
        RULES[Capability.QUEUE_READ].user_scopes
    ):
        return []
    groups = list(Group.objects.all())
    if principal.is_superuser:
        return groups
    roots = set(Membership.objects.filter(user_id=user.pk).values_list("group_id", flat=True))
    children: dict[Any, list[Group]] = {}
    for g in groups:
        children.setdefault(g.parent_id, []).append(g)
    seen: dict[Any, Group] = {}
    stack = [g for g in groups if g.pk in roots]
    while stack:
        g = stack.pop()
        if g.pk not in seen:
            seen[g.pk] = g
            stack.extend(children.get(g.pk, []))
    return sorted(seen.values(), key=lambda g: g.slug)


def may_read_metrics(principal: Principal) -> bool:
    """May ``principal`` scrape ``/metrics`` (every collection's numbers, so
    staff only)? A token needs the ``metrics:read`` scope and a staff (or
    superuser) user behind it; a session login of a staff user may too. App
    tokens never: an app sees only its own chain, metrics span all groups."""
    user = principal.user
    if principal.app is not None or user is None or not user.is_active:
        return False
    if not (getattr(user, "is_staff", False) or principal.is_superuser):
        return False
    return principal.has_scope(frozenset({str(Scope.METRICS_READ)}))
