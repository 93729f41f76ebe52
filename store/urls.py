"""Store-primitive routes of SPEC §6 (``{g}`` a group slug or id)."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
