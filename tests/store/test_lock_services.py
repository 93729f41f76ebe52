"""The groups' TTL locks as services and as the ``lock`` context manager."""

from dataclasses import astuple
from datetime import timedelta

import pytest

from principals.models import Group
from queueproject import clock
from queueproject.leases import lease_try
from queueproject.models import Lease
from store import locks
from store.exceptions import InvalidLockInput, LockHeld, LockLost
from store.locks import lock, lock_acquire, lock_get, lock_release, lock_renew
from tests.conftest import ROOT
from tests.factories import GroupFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def group(db):
    return GroupFactory(slug="g")


def test_lock_acquire__a_free_lock_is_taken_with_token_1(group):
    with clock.frozen():
        state = lock_acquire(group=group, name="report", owner="a", ttl=10)
        assert (state.owner, state.fencing_token) == ("a", 1)
        assert state.expires_at == clock.now() + timedelta(seconds=10)
        assert astuple(lock_get(group=group, name="report")) == astuple(state)


def test_lock_acquire__same_owner_reacquires_without_extending_and_keeps_the_token(group):
    with clock.frozen():
        first = lock_acquire(group=group, name="report", owner="a", ttl=10)
        clock.advance(5)
        again = lock_acquire(group=group, name="report", owner="a", ttl=10)
        assert again == first


def test_lock_acquire__another_owner_is_refused_naming_holder_and_expiry(group):
    with clock.frozen():
        held = lock_acquire(group=group, name="report", owner="a", ttl=10)
        with pytest.raises(LockHeld) as exc:
            lock_acquire(group=group, name="report", owner="b", ttl=10)
        assert exc.value.details == {"owner": "a", "expires_at": held.expires_at.isoformat()}
        assert "'a'" in exc.value.message and held.expires_at.isoformat() in exc.value.message


def test_lock_acquire__after_expiry_another_owner_takes_over_with_a_higher_token(group):
    with clock.frozen():
        first = lock_acquire(group=group, name="report", owner="a", ttl=10)
        clock.advance(10)
        assert lock_get(group=group, name="report").owner is None  # expired: free
        second = lock_acquire(group=group, name="report", owner="b", ttl=10)
        assert second.owner == "b" and second.fencing_token > first.fencing_token
        with pytest.raises(LockLost):
            lock_renew(group=group, name="report", owner="a", ttl=10)


def test_lock_renew__only_the_unexpired_owner_extends_and_the_token_stays(group):
    with clock.frozen():
        first = lock_acquire(group=group, name="report", owner="a", ttl=10)
        with pytest.raises(LockLost):
            lock_renew(group=group, name="report", owner="b", ttl=10)
        clock.advance(5)
        renewed = lock_renew(group=group, name="report", owner="a", ttl=10)
        assert renewed.expires_at == clock.now() + timedelta(seconds=10)
        assert renewed.fencing_token == first.fencing_token
        assert astuple(lock_get(group=group, name="report")) == astuple(renewed)


def test_lock_release__only_by_the_owner_then_free(group):
    lock_acquire(group=group, name="report", owner="a", ttl=10)
    with pytest.raises(LockLost):
        lock_release(group=group, name="report", owner="b")
    lock_release(group=group, name="report", owner="a")
    state = lock_get(group=group, name="report")
    assert (state.owner, state.expires_at, state.fencing_token) == (None, None, 1)
    with pytest.raises(LockLost):
        lock_release(group=group, name="report", owner="a")  # twice


def test_fencing_token__strictly_increases_across_release_and_reacquire(group):
    tokens = []
    for owner in ["a", "a", "b", "a", "c"]:
        tokens.append(lock_acquire(group=group, name="report", owner=owner, ttl=10).fencing_token)
        lock_release(group=group, name="report", owner=owner)
    assert tokens == [1, 2, 3, 4, 5]
    assert Lease.objects.count() == 1  # the row outlives releases


def test_lock_get__never_taken_is_free_with_token_0(group):
    state = lock_get(group=group, name="never")
    assert (state.owner, state.expires_at, state.fencing_token) == (None, None, 0)


def test_locks__are_namespaced_per_group_and_apart_from_internal_leases(group):
    other = GroupFactory(slug="other")
    assert lease_try(name="report", owner="internal", ttl=10)
    lock_acquire(group=group, name="report", owner="a", ttl=10)
    lock_acquire(group=other, name="report", owner="b", ttl=10)
    assert Lease.objects.get(name="report").owner == "internal"
    assert Lease.objects.get(name=f"g:{group.pk}:report").owner == "a"
    assert Lease.objects.get(name=f"g:{other.pk}:report").owner == "b"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"name": ""}, "name"),
        ({"name": "a/b"}, "name"),
        ({"name": "x" * 65}, "name"),
        ({"owner": ""}, "owner"),
        ({"owner": "o" * 129}, "owner"),
        ({"ttl": 0}, "ttl"),
        ({"ttl": 86401}, "ttl"),
    ],
)
def test_lock_acquire__bad_input_names_the_field(group, kwargs, field):
    args = {"name": "report", "owner": "a", "ttl": 10, **kwargs}
    with pytest.raises(InvalidLockInput) as exc:
        lock_acquire(group=group, **args)
    assert set(exc.value.details) == {field}


# ---------------------------------------------------------- the context manager


def test_lock__holds_for_the_block_yields_the_token_and_releases(group):
    with lock("nightly-report", group=group, ttl=60) as token:
        state = lock_get(group=group, name="nightly-report")
        assert (state.owner, state.fencing_token) == (locks.PROCESS_OWNER, token)
        assert token == 1
    assert lock_get(group=group, name="nightly-report").owner is None
    with lock("nightly-report", group="g", ttl=60) as again:  # by slug; a new acquisition
        assert again == 2


def test_lock__held_elsewhere_raises_lock_held_and_runs_nothing(group):
    lock_acquire(group=group, name="nightly-report", owner="other-host", ttl=60)
    ran = []
    with pytest.raises(LockHeld, match="other-host"), lock("nightly-report", group=group, ttl=60):
        ran.append(1)
    assert ran == []
    assert lock_get(group=group, name="nightly-report").owner == "other-host"


def test_lock__releases_when_the_block_raises(group):
    with pytest.raises(ZeroDivisionError), lock("nightly-report", group=group, owner="me", ttl=60):
        raise ZeroDivisionError
    assert lock_get(group=group, name="nightly-report").owner is None


def test_lock__lost_during_the_block_raises_lock_lost_at_exit(group):
    with clock.frozen():
        with pytest.raises(LockLost), lock("nightly-report", group=group, owner="me", ttl=5):
            clock.advance(6)
            lock_acquire(group=group, name="nightly-report", owner="thief", ttl=60)
        assert lock_get(group=group, name="nightly-report").owner == "thief"


def test_readme__the_python_lock_example_runs(capsys):
    GroupFactory(slug="acme")
    readme = (ROOT / "README.md").read_text()
    example = readme.split("## Locks", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(example, "README.md", "exec"), {})
    assert capsys.readouterr().out == "report written under fencing token 1\n"
    lock_acquire(group=Group.objects.get(slug="acme"), name="nightly-report", owner="x", ttl=60)
    exec(compile(example, "README.md", "exec"), {})
    assert capsys.readouterr().out.startswith("Lock 'nightly-report' is held by 'x' until ")
