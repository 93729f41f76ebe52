"""The group queue worker behind ``manage.py queue_worker`` (SPEC §2, §5).

Its threads and database connections are bounded by its own settings, not by
the number of consumers it serves (README, "Database connections"):

- the main thread runs the ``Worker`` (``supervisor``): a ``Runner`` loop that
  starts the other threads, gives the lane pool the consumers to serve
  (re-read now and then), shows progress, runs the housekeeping loops one
  after another (the registry heartbeat; maintenance, the scheduler and the
  outbox relay, which act only while this process leads or has rows to
  relay), and on the first SIGTERM/SIGINT stops claiming and waits for
  in-flight work up to the grace period (a second signal exits at once: the
  Runner base);
- ``concurrency`` slot threads run the slot loop (``slots``): take a due
  collection from the pool (``pool``), claim up to ``batch`` messages in one
  statement as the collection's next consumer in turn (``lanes``: a lane is
  one consumer, a handler on a collection as one app; the lanes of one
  collection form a ``Rotation``), run the handler on each, nack or fail each
  failure at once, and ack the successes together with the next claim; idle
  slots wait in the pool, which wakes a collection on its LISTEN/NOTIFY
  channel (or polls);
- the acker thread (``acker``) acks in batches what the slots could not ack
  with a claim, counts and logs the acks they made, and extends the leases of
  claimed messages every third of their visibility timeout while they wait or
  run (``heartbeat``);
- on PostgreSQL with LISTEN, the process's listener thread (``queueproject.notify``).

``outcomes`` counts and logs (one JSON line per message) what became of each
message, and settles failures and releases.

A crash leaves the claims to expire; any worker claims them again afterwards.
Each thread survives a lost database connection: it drops the connection,
backs off and carries on. Only ``groupqueues.services`` touches messages.
"""

from groupqueues.worker.acker import Acker, Settled
from groupqueues.worker.heartbeat import Batch, Heartbeat, InFlight
from groupqueues.worker.lanes import Lane, Rotation, lanes_for_handler, lanes_of_consumers
from groupqueues.worker.outcomes import Outcomes, Tally
from groupqueues.worker.pool import LanePool
from groupqueues.worker.slots import Budget, SlotLoop
from groupqueues.worker.supervisor import Worker, WorkerOptions, connections_needed, poll_mode
from queueproject.runner import default_worker_id

__all__ = [
    "Acker",
    "Batch",
    "Budget",
    "Heartbeat",
    "InFlight",
    "Lane",
    "LanePool",
    "Outcomes",
    "Rotation",
    "Settled",
    "SlotLoop",
    "Tally",
    "Worker",
    "WorkerOptions",
    "connections_needed",
    "default_worker_id",
    "lanes_for_handler",
    "lanes_of_consumers",
    "poll_mode",
]
