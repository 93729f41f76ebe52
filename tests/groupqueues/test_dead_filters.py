"""The one dead-message filter: its checks, its matches, and the services
that take it (redrive by filter, purge of the dead by filter)."""

from datetime import UTC, datetime, timedelta

import pytest

from groupqueues import services
from groupqueues.dead_filters import DeadFilter, dead_filter, parse_moment
from groupqueues.exceptions import InvalidQueueInput
from groupqueues.models import Message
from queueproject import clock
from tests.groupqueues.conftest import enqueue
from tests.groupqueues.dead_helpers import a_mix, dead, states

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def matching(queue, **filters):
    where = dead_filter(**filters)
    return {m.id for m in services.messages_dead(collection=queue, where=where)}


def test_dead_filter__each_field_narrows(queue, frozen):
    ids = a_mix(queue)
    assert matching(queue) == {ids[k] for k in ("failed_old", "failed_new", "expired", "exhausted")}
    assert matching(queue, reason=["failed"]) == {ids["failed_old"], ids["failed_new"]}
    assert matching(queue, reason=["expired", "exhausted"]) == {ids["expired"], ids["exhausted"]}
    hour_ago = clock.now() - timedelta(hours=1)
    assert matching(queue, since=hour_ago) == {ids["failed_new"], ids["expired"], ids["exhausted"]}
    assert matching(queue, until=hour_ago) == {ids["failed_old"]}
    assert matching(queue, error_contains="timeout") == {ids["failed_old"], ids["exhausted"]}
    assert matching(queue, reason=["failed"], error_contains="timeout") == {ids["failed_old"]}


def test_dead_filter__limit_takes_the_most_recent_deaths(queue, frozen):
    ids = a_mix(queue)
    shown = list(services.messages_dead(collection=queue, where=dead_filter(limit=2)))
    assert [m.id for m in shown] == [ids["exhausted"], ids["failed_new"]]


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"reason": ["lost"]}, "reason"),
        ({"since": NOW, "until": NOW}, "until"),
        ({"since": NOW.replace(tzinfo=None)}, "since"),
        ({"error_contains": ""}, "error_contains"),
        ({"error_contains": "x" * 201}, "error_contains"),
        ({"limit": 0}, "limit"),
        ({"limit": 10_001}, "limit"),
    ],
)
def test_dead_filter__refuses_bad_values_naming_the_field(filters, field):
    with pytest.raises(InvalidQueueInput) as caught:
        dead_filter(**filters)
    assert field in caught.value.details


def test_parse_moment__ages_dates_and_iso():
    assert parse_moment("2h", field="since", now=NOW) == NOW - timedelta(hours=2)
    assert parse_moment("15m", field="since", now=NOW) == NOW - timedelta(minutes=15)
    assert parse_moment("2026-11-30", field="since", now=NOW) == datetime(2026, 11, 30, tzinfo=UTC)
    assert parse_moment("2026-11-30T08:00:00Z", field="since", now=NOW) == datetime(
        2026, 11, 30, 8, tzinfo=UTC
    )
    for bad in ("yesterday", "2026-11-30T08:00:00", "-2h"):
        with pytest.raises(InvalidQueueInput, match="since"):
            parse_moment(bad, field="since", now=NOW)


def test_redrive__by_filter_moves_only_the_matches(queue, frozen):
    ids = a_mix(queue)
    count = services.messages_redrive(collection=queue, where=dead_filter(reason=["failed"]))
    assert count == 2
    now = states(queue)
    assert now[ids["failed_old"]] == now[ids["failed_new"]] == "ready"
    assert now[ids["expired"]] == now[ids["exhausted"]] == "dead"
    redriven = Message.objects.get(id=ids["failed_old"])
    assert (redriven.attempt, redriven.last_error, redriven.dead_reason) == (
        0,
        "SMTP timeout",
        None,
    )


def test_redrive__by_filter_with_limit(queue, frozen):
    ids = a_mix(queue)
    assert services.messages_redrive(collection=queue, where=dead_filter(limit=1)) == 1
    assert states(queue)[ids["exhausted"]] == "ready"
    assert list(states(queue).values()).count("dead") == 3


def test_redrive__needs_exactly_one_selection(queue):
    with pytest.raises(InvalidQueueInput):
        services.messages_redrive(collection=queue, all=True, where=DeadFilter())
    with pytest.raises(InvalidQueueInput):
        services.messages_redrive(collection=queue)


def test_purge_dead__by_filter_deletes_only_matching_dead(queue, frozen):
    ids = a_mix(queue)
    claimed_id = enqueue(queue)
    services.message_claim(collection=queue, worker_id="w", n=5)
    count = services.messages_purge_dead(collection=queue, where=dead_filter(error_contains="smtp"))
    assert count == 2
    left = states(queue)
    assert ids["failed_old"] not in left and ids["exhausted"] not in left
    assert {ids["failed_new"], ids["expired"], ids["ready"], claimed_id} <= set(left)


def test_purge_dead__empty_filter_deletes_every_dead_and_nothing_live(queue, frozen):
    a_mix(queue)
    assert services.messages_purge_dead(collection=queue, where=DeadFilter()) == 4
    assert list(states(queue).values()) == ["ready"]


def test_purge_dead__with_limit(queue, frozen):
    ids = a_mix(queue)
    assert services.messages_purge_dead(collection=queue, where=dead_filter(limit=3)) == 3
    assert ids["failed_old"] in states(queue)


def test_filters__other_collections_untouched(queue, group, frozen):
    other = services.collection_create(group=group, name="other")
    theirs = dead(other, reason="failed")
    a_mix(queue)
    services.messages_redrive(collection=queue, where=dead_filter(limit=10))
    services.messages_purge_dead(collection=queue, where=DeadFilter())
    assert states(other) == {theirs: "dead"}
