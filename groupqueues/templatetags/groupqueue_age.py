"""``|age``: seconds as the admin shows ages (``groupqueues.admin.age``)."""

from django import template

register = template.Library()


@register.filter
def age(seconds: float | None) -> str:
    from groupqueues.admin import age as shown

    return shown(seconds)
