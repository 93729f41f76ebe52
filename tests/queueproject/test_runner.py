"""Run-loop scaffolding: the reconnect backoff of ``Resilient``."""

import threading

from django.db import OperationalError

from queueproject.runner import FAILED, RECONNECT_BACKOFF_MAX, Resilient


class RecordingStop(threading.Event):
    """A stop event that records how long each back-off would wait."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return False


def lost() -> None:
    raise OperationalError("server closed the connection unexpectedly")


def test_resilient__backs_off_doubling_from_a_tenth_to_the_cap_with_jitter():
    stop = RecordingStop()
    guard = Resilient(stop, "t")
    for _ in range(10):
        assert guard.turn(lost) is FAILED
    full = [min(RECONNECT_BACKOFF_MAX, 0.1 * 2**i) for i in range(10)]
    assert all(f / 2 <= w <= f for w, f in zip(stop.waits, full, strict=True)), stop.waits
    assert max(stop.waits) <= RECONNECT_BACKOFF_MAX


def test_resilient__threads_cut_off_together_do_not_reconnect_together():
    stop = RecordingStop()
    for _ in range(20):
        Resilient(stop, "t").turn(lost)
    assert len(set(stop.waits)) > 1  # jittered (equal jitter: backoff_delay)


def test_resilient__a_good_turn_resets_the_backoff():
    stop = RecordingStop()
    guard = Resilient(stop, "t")
    for _ in range(5):
        guard.turn(lost)
    assert guard.turn(lambda: 7) == 7
    guard.turn(lost)
    assert 0.05 <= stop.waits[-1] <= 0.1
