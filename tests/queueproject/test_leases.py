"""TTL locks: take if free or expired, renew and release by the holder only."""

import threading

import pytest
from django.db import connection

from queueproject import clock
from queueproject.leases import Leadership, LeaseState, lease_release, lease_renew, lease_try
from queueproject.models import Lease

pytestmark = pytest.mark.django_db


def test_lease_try__free_lease_is_taken_and_held_lease_refused():
    with clock.frozen():
        assert lease_try(name="m", owner="a", ttl=10)
        assert not lease_try(name="m", owner="b", ttl=10)
        assert Lease.objects.get(name="m").owner == "a"


def test_lease_try__same_owner_reacquires_without_extending():
    with clock.frozen():
        assert lease_try(name="m", owner="a", ttl=10)
        expires = Lease.objects.get(name="m").expires_at
        clock.advance(5)
        assert lease_try(name="m", owner="a", ttl=10)
        assert Lease.objects.get(name="m").expires_at == expires


def test_lease_try__expired_lease_is_taken_over():
    with clock.frozen():
        assert lease_try(name="m", owner="a", ttl=10)
        clock.advance(10)
        assert lease_try(name="m", owner="b", ttl=10)
        assert Lease.objects.get(name="m").owner == "b"


def test_lease_renew__only_the_unexpired_holder_renews():
    with clock.frozen():
        lease_try(name="m", owner="a", ttl=10)
        assert not lease_renew(name="m", owner="b", ttl=10)
        clock.advance(5)
        assert lease_renew(name="m", owner="a", ttl=10)
        clock.advance(9)
        assert not lease_try(name="m", owner="b", ttl=10)
        clock.advance(1)
        assert not lease_renew(name="m", owner="a", ttl=10)  # lapsed: no stealing back


def test_lease_release__only_by_the_holder():
    lease_try(name="m", owner="a", ttl=10)
    assert not lease_release(name="m", owner="b")
    assert lease_release(name="m", owner="a")
    assert lease_try(name="m", owner="b", ttl=10)


def token(state: LeaseState | None) -> int:
    assert state is not None, "not held"
    return state.fencing_token


def test_lease_try__fencing_token_grows_with_each_new_acquisition_only():
    with clock.frozen():
        assert token(lease_try(name="m", owner="a", ttl=10)) == 1
        assert token(lease_try(name="m", owner="a", ttl=10)) == 1  # re-acquired: kept
        assert token(lease_renew(name="m", owner="a", ttl=10)) == 1
        clock.advance(10)
        assert token(lease_try(name="m", owner="a", ttl=10)) == 2  # after expiry: new
        assert lease_release(name="m", owner="a")
        assert token(lease_try(name="m", owner="b", ttl=10)) == 3
        assert Lease.objects.get(name="m").fencing_token == 3


def test_lease_release__keeps_the_row_free_so_tokens_never_repeat():
    with clock.frozen():
        lease_try(name="m", owner="a", ttl=10)
        assert lease_release(name="m", owner="a")
        row = Lease.objects.get(name="m")
        assert (row.owner, row.expires_at, row.fencing_token) == (None, clock.now(), 1)
        assert not lease_renew(name="m", owner="a", ttl=10)
        assert not lease_release(name="m", owner="a")
        assert token(lease_try(name="m", owner="a", ttl=10)) == 2


def test_leadership__one_leader_and_takeover_after_ttl():
    with clock.frozen():
        first = Leadership(name="x", owner="1", ttl=5)
        second = Leadership(name="x", owner="2", ttl=5)
        assert first.ensure() and not second.ensure()
        clock.advance(4)
        assert first.ensure() and not second.ensure()  # renewed
        clock.advance(6)  # first stops renewing (died)
        assert second.ensure()
        assert not first.ensure()
        second.resign()
        assert first.ensure()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_lease_try__concurrent_takers_have_exactly_one_winner():
    for round_ in range(20):
        name = f"race-{round_}"
        barrier = threading.Barrier(6)
        winners: list[str] = []

        def take(owner, name=name, barrier=barrier, winners=winners):
            try:
                barrier.wait()
                if lease_try(name=name, owner=owner, ttl=30):
                    winners.append(owner)
            finally:
                connection.close()

        threads = [threading.Thread(target=take, args=(str(i),)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(winners) == 1, winners
