"""The group queue worker behind ``manage.py queue_worker`` (SPEC §2, §5).

Threads and what they do, one module each:

- the main thread runs the ``Worker`` (``supervisor``): a ``Runner`` loop that
  starts the other threads, supervises the slot threads, reloads the
  consumers now and then, shows progress, and on the first SIGTERM/SIGINT
  stops claiming and waits for in-flight work up to the grace period (a
  second signal exits at once: the Runner base);
- ``concurrency`` slot threads per lane (``lanes``: a lane is one consumer, a
  collection and a handler) run the slot loop (``slots``): claim up to
  ``batch`` messages in one statement, run the handler on each, nack or fail
  each failure at once, and ack the successes together with the next claim;
  idle slots sleep on the collection's LISTEN/NOTIFY channel (or poll);
- the acker thread (``acker``) acks in batches what the slots could not ack
  with a claim, and counts and logs the acks they made;
- one heartbeat thread (``heartbeat``) extends the leases of claimed messages
  every third of their visibility timeout while they wait or run;
- one maintenance thread (``groupqueues.maintenance``) that acts only while
  this process holds the maintenance lease.

``outcomes`` counts and logs (one JSON line per message) what became of each
message, and settles failures and releases.

A crash leaves the claims to expire; any worker claims them again afterwards.
Each thread survives a lost database connection: it drops the connection,
backs off and carries on. Only ``groupqueues.services`` touches messages.
"""

from groupqueues.worker.acker import Acker, Settled
from groupqueues.worker.heartbeat import Batch, Heartbeat, InFlight
from groupqueues.worker.lanes import Lane, lanes_for_handler, lanes_of_consumers
from groupqueues.worker.outcomes import Outcomes, Tally
from groupqueues.worker.slots import Budget, SlotLoop
from groupqueues.worker.supervisor import Worker, WorkerOptions, poll_mode
from queueproject.runner import default_worker_id

__all__ = [
    "Acker",
    "Batch",
    "Budget",
    "Heartbeat",
    "InFlight",
    "Lane",
    "Outcomes",
    "Settled",
    "SlotLoop",
    "Tally",
    "Worker",
    "WorkerOptions",
    "default_worker_id",
    "lanes_for_handler",
    "lanes_of_consumers",
    "poll_mode",
]
