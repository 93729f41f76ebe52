"""Store-primitive routes of SPEC §6 (``{g}`` a group slug or id)."""

from django.urls import path

from groupqueues.urls import SegmentConverter  # noqa: F401  (registers gq_segment)
from store import lock_views

L = "groups/<gq_segment:g>/locks/<gq_segment:name>/"

urlpatterns = [
    path(L, lock_views.LockView.as_view(), name="store-lock"),
    path(L + "renew/", lock_views.LockRenewView.as_view(), name="store-lock-renew"),
]
