"""Admin for groups, apps, memberships and tokens.

Staff users see and change only what their role allows, through the same
capability check as the API (superusers: everything): viewers see a group's
subtree, admins manage its memberships, apps and app tokens.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from principals import services
from principals.authz import RULES, Capability, Principal, has_capability, readable_groups
from principals.exceptions import GroupCycle
from principals.models import ApiToken, App, Group, Membership, Role, Scope


def admin_principal(request: HttpRequest) -> Principal:
    return Principal.for_user(request.user)


def manageable_groups(request: HttpRequest) -> list[Group]:
    """Groups whose access the staff user may manage (admin+; all for superusers)."""
    principal = admin_principal(request)
    return [
        g
        for g in readable_groups(principal)
        if has_capability(principal, Capability.GROUP_MANAGE_ACCESS, g)
    ]


_QS = TypeVar("_QS", bound=QuerySet[Any])


class CapabilityAdmin(admin.ModelAdmin):
    """Permissions from capabilities instead of Django model permissions.

    ``group_of(obj)`` names the group an object belongs to; viewing needs
    ``view_capability`` and changing ``change_capability`` on that group.
    """

    view_capability = Capability.QUEUE_READ
    change_capability = Capability.GROUP_MANAGE_ACCESS

    def group_of(self, obj: Any) -> Group:
        raise NotImplementedError

    @staticmethod
    def readable(request: HttpRequest, qs: _QS, field: str = "group") -> _QS:
        """``qs`` narrowed to rows whose ``field`` is a group the admin user can
        read (all of them for a superuser): the one row scoping of every
        capability admin's list."""
        if request.user.is_superuser:
            return qs
        return qs.filter(
            **{f"{field}__in": [g.pk for g in readable_groups(admin_principal(request))]}
        )

    def _may(self, request: HttpRequest, capability: Capability, obj: Any) -> bool:
        if not request.user.is_active or not request.user.is_staff:
            return False
        if request.user.is_superuser:
            return True
        if obj is None:
            return bool(readable_groups(admin_principal(request)))
        return has_capability(admin_principal(request), capability, self.group_of(obj))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._may(request, self.view_capability, None)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may(request, self.view_capability, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is None:
            return request.user.is_superuser or bool(manageable_groups(request))
        return self._may(request, self.change_capability, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_change_permission(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser or bool(manageable_groups(request))


class MembershipInlineFormSet(forms.BaseInlineFormSet):
    request: HttpRequest  # set on the class by MembershipInline.get_formset

    def clean(self) -> None:
        super().clean()
        principal = Principal.for_user(self.request.user)
        for form in self.forms:
            role = form.cleaned_data.get("role") if form.has_changed() else None
            if (
                role
                and int(role) >= Role.OWNER
                and not principal.is_superuser
                and principal.role_on(self.instance) != Role.OWNER
            ):
                raise ValidationError("Only an owner may grant the owner role.")


class MembershipInline(admin.TabularInline):
    model = Membership
    formset = MembershipInlineFormSet
    extra = 0
    autocomplete_fields = ["user"]

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        # Django builds the class from ``self.formset``, so it is a MembershipInlineFormSet.
        formset = cast(type[MembershipInlineFormSet], super().get_formset(request, obj, **kwargs))
        formset.request = request
        return formset

    def _may_manage(self, request: HttpRequest, obj: Any) -> bool:
        if request.user.is_superuser:
            return True
        return obj is not None and has_capability(
            admin_principal(request), Capability.GROUP_MANAGE_ACCESS, obj
        )

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_staff

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj)


class GroupForm(forms.ModelForm):
    class Meta:
        model = Group
        fields = ["slug", "name", "parent"]

    def clean_parent(self) -> Group | None:
        parent = self.cleaned_data.get("parent")
        if parent is not None and self.instance.pk is not None:
            node: Group | None = parent
            while node is not None:
                if node.pk == self.instance.pk:
                    raise ValidationError(GroupCycle.__doc__ or GroupCycle.__name__)
                node = node.parent
        return parent


@admin.register(Group)
class GroupAdmin(CapabilityAdmin):
    form = GroupForm
    list_display = ["path", "name", "parent", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]

    def group_of(self, obj: Group) -> Group:
        return obj

    def get_queryset(self, request: HttpRequest) -> Any:
        qs = super().get_queryset(request).select_related("parent")
        if request.user.is_superuser:
            return qs
        return qs.filter(pk__in=[g.pk for g in readable_groups(admin_principal(request))])

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "parent" and not request.user.is_superuser:
            kwargs["queryset"] = Group.objects.filter(
                pk__in=[g.pk for g in manageable_groups(request)]
            )
            kwargs["required"] = True
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Group, form: Any, change: bool) -> None:
        if change and "parent" in form.changed_data:
            try:
                services.group_set_parent(group=obj, parent=obj.parent)
            except GroupCycle as exc:
                messages.error(request, exc.message)
                return
        super().save_model(request, obj, form, change)

    def delete_model(self, request: HttpRequest, obj: Group) -> None:
        services.group_delete(group=obj)


@admin.register(App)
class AppAdmin(CapabilityAdmin):
    list_display = ["slug", "name", "group", "created_at"]
    search_fields = ["slug", "name"]
    list_filter = ["group"]

    def group_of(self, obj: App) -> Group:
        return obj.group

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "webhook_url":
            kwargs["assume_scheme"] = "https"  # Django 6's default; explicit on 5.2
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_exclude(self, request: HttpRequest, obj: Any = None) -> Any:
        # The webhook secret is for those who manage the app's group only.
        if obj is not None and not self.has_change_permission(request, obj):
            return ["webhook_secret"]
        return []

    def get_queryset(self, request: HttpRequest) -> Any:
        qs = super().get_queryset(request).select_related("group")
        return self.readable(request, qs)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "group" and not request.user.is_superuser:
            kwargs["queryset"] = Group.objects.filter(
                pk__in=[g.pk for g in manageable_groups(request)]
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


# What each capability lets a holder do, in words (the capabilities a scope
# opens are read from ``authz.RULES``: the one source of truth).
CAPABILITY_WORDS = {
    Capability.QUEUE_READ: "read queues, stats and messages",
    Capability.QUEUE_ENQUEUE: "enqueue messages",
    Capability.QUEUE_CONSUME: "claim, ack, nack, extend and cancel messages",
    Capability.QUEUE_MANAGE: "create, change, pause, purge and redrive queues",
    Capability.GROUP_MANAGE_ACCESS: "manage members, apps and app tokens",
    Capability.SESSION_CREATE: "create tasks and sessions",
    Capability.SESSION_READ: "read sessions and their entries",
    Capability.SESSION_EDIT: "insert, edit, reorder and delete entries",
    Capability.SESSION_CONSUME: "reserve and acknowledge entries",
    Capability.TASK_ADMIN: "archive and purge tasks",
}


def scope_allows(scope: str) -> list[str]:
    """What ``scope`` lets a token do (with the role it also needs)."""
    return [
        CAPABILITY_WORDS.get(capability, str(capability))
        for capability, rule in RULES.items()
        if scope in rule.user_scopes or scope in rule.app_scopes
    ]


def scopes_html(scopes: list[str]) -> str:
    """The scopes one per line, each with what it allows."""
    if not scopes:
        return "-"
    return format_html_join(
        mark_safe("<br>"), "<code>{}</code>: {}",
        ((s, "; ".join(scope_allows(s)) or "nothing yet") for s in scopes),
    )  # fmt: skip


class TokenCreateForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=lambda: [(s.value, f"{s.value}: {'; '.join(scope_allows(s))}") for s in Scope],
        widget=forms.CheckboxSelectMultiple, required=True,
    )  # fmt: skip

    class Meta:
        model = ApiToken
        fields = ["name", "user", "app", "scopes", "expires_at"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if bool(data.get("user")) == bool(data.get("app")):
            raise ValidationError("Choose exactly one owner: a user or an app.")
        return data


@admin.register(ApiToken)
class ApiTokenAdmin(CapabilityAdmin):
    list_display = [
        "name",
        "prefix",
        "owner_label",
        "scopes_readable",
        "expires_at",
        "revoked",
        "last_used_at",
    ]
    list_filter = ["revoked"]
    search_fields = ["name", "prefix"]
    actions = ["revoke_tokens"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "scopes_readable"]

    @admin.display(description="scopes (what they allow)")
    def scopes_readable(self, obj: ApiToken) -> str:
        return scopes_html(obj.scopes)

    def group_of(self, obj: ApiToken) -> Group:
        if obj.app is not None:
            return obj.app.group
        raise LookupError  # user tokens: only their owner or a superuser

    def _may(self, request: HttpRequest, capability: Capability, obj: Any) -> bool:
        if obj is not None and obj.user_id is not None:
            return request.user.is_superuser or (
                request.user.is_staff and obj.user_id == request.user.pk
            )
        return super()._may(request, capability, obj)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[Any]]:
        if obj is None:
            kwargs["form"] = TokenCreateForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["name", "user", "app", "scopes", "expires_at"]
        return ["name", "user", "app", "expires_at", "revoked", *self.readonly_fields]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return []
        return ["name", "user", "app", "scopes", "expires_at", "revoked", *self.readonly_fields]

    def get_queryset(self, request: HttpRequest) -> Any:
        qs = super().get_queryset(request).select_related("user", "app__group")
        if request.user.is_superuser:
            return qs
        groups = [g.pk for g in manageable_groups(request)]
        from django.db.models import Q

        return qs.filter(Q(user=request.user) | Q(app__group__in=groups))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if not request.user.is_superuser:
            if db_field.name == "app":
                kwargs["queryset"] = App.objects.filter(
                    group__in=[g.pk for g in manageable_groups(request)]
                )
            if db_field.name == "user":
                from django.contrib.auth import get_user_model

                # The admin only serves signed-in staff: request.user is never AnonymousUser here.
                own = get_user_model().objects.filter(pk=request.user.pk)  # type: ignore[misc]
                kwargs["queryset"] = own
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            return  # tokens are immutable apart from revocation (the action)
        token, secret = services.token_create(
            name=form.cleaned_data["name"],
            scopes=form.cleaned_data["scopes"],
            user=form.cleaned_data.get("user"),
            app=form.cleaned_data.get("app"),
            expires_at=form.cleaned_data.get("expires_at"),
        )
        obj.pk = token.pk
        messages.warning(
            request,
            f"Token {token.name!r} created. Copy its secret now; it is not shown again: {secret}",
        )

    @admin.action(description="Revoke selected tokens")
    def revoke_tokens(self, request: HttpRequest, queryset: Any) -> None:
        count = 0
        for token in queryset.filter(revoked=False):
            if self.has_change_permission(request, token):
                services.token_revoke(tokens=[token])
                self.log_change(request, token, "Revoked")
                count += 1
        messages.success(request, f"Revoked {count} token(s).")
