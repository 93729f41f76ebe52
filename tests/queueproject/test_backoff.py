import pytest

from queueproject.backoff import backoff_delay


@pytest.mark.parametrize(("attempt", "expected"), [(1, 1.0), (2, 2.0), (3, 4.0), (10, 60.0)])
def test_backoff_delay__doubles_up_to_the_cap(attempt, expected):
    assert backoff_delay(attempt, base=1.0, cap=60.0, jitter=1.0) == expected


def test_backoff_delay__jitter_keeps_at_least_half():
    delays = [backoff_delay(3, base=1.0, cap=60.0) for _ in range(200)]
    assert all(2.0 <= d <= 4.0 for d in delays)
    assert len(set(delays)) > 1


def test_backoff_delay__huge_attempts_do_not_overflow():
    assert backoff_delay(10_000, base=1.0, cap=3600.0, jitter=1.0) == 3600.0
    assert backoff_delay(0, base=1.0, cap=3600.0, jitter=1.0) == 1.0
