"""Property: a reorder is accepted iff it is an exact permutation of the visible
entries; otherwise the order is unchanged."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionqueues import exceptions as err
from sessionqueues import services
from sessionqueues.models import QueuedMessage, Session
from tests.sessionqueues.conftest import put

pytestmark = pytest.mark.django_db

STRANGER = uuid.UUID(int=7)


def order(session: Session) -> list[uuid.UUID]:
    return list(
        QueuedMessage.objects.filter(session=session)
        .order_by("position")
        .values_list("pk", flat=True)
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    size=st.integers(min_value=0, max_value=5),
    reserve=st.booleans(),
    data=st.data(),
)
def test_reorder__accepted_iff_an_exact_permutation(session, size, reserve, data):
    services.queue_delete_all(session_id=session.pk)
    QueuedMessage.objects.filter(session=session).delete()
    for i in range(size):
        put(session, f"m{i}")
    reserved = None
    if reserve and size:
        reserved, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    everything = order(session)
    visible = [pk for pk in everything if reserved is None or pk != reserved.pk]
    if data.draw(st.booleans(), label="permutation"):
        submitted = data.draw(st.permutations(visible), label="submitted")
    else:
        picks = data.draw(st.lists(st.integers(min_value=-1, max_value=size), max_size=7))
        submitted = [everything[p] if 0 <= p < len(everything) else STRANGER for p in picks]
    exact = sorted(submitted) == sorted(visible) and len(submitted) == len(set(submitted))
    try:
        services.queue_reorder(session_id=session.pk, ordered_ids=submitted)
    except err.QueueChanged:
        assert not exact
        assert order(session) == everything
    else:
        assert exact
        after = order(session)
        assert [pk for pk in after if pk in set(visible)] == submitted
        if reserved is not None:
            assert after.index(reserved.pk) == everything.index(reserved.pk)
