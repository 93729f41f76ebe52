"""Project-wide store primitives shared by the queue engines."""

from django.db import models


class Lease(models.Model):
    """A TTL lock: held by ``owner`` until ``expires_at``; free when ``owner``
    is null (released) or ``expires_at`` has passed. Used to elect one leader
    (maintenance, schedulers) among many processes and for the groups' public
    locks; see ``queueproject.leases`` for the operations.

    A released lock keeps its row so ``fencing_token`` never goes back: each
    new acquisition of the name takes the next token, so a resource guarded
    by the lock can refuse writes carrying an older one."""

    name = models.CharField(max_length=200, primary_key=True)
    owner = models.CharField(max_length=200, null=True, blank=True)
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    fencing_token = models.BigIntegerField(default=1)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(fencing_token__gte=1), name="lease_fencing_token_positive"
            )
        ]

    def __str__(self) -> str:
        if self.owner is None:
            return f"{self.name} free"
        return f"{self.name} held by {self.owner} until {self.expires_at:%H:%M:%S}"


class WorkerProcess(models.Model):
    """One live worker process (``queue_worker`` or ``session_dispatch``): the
    row its registration thread heartbeats (``queueproject.workers_registry``).
    ``id`` is the process's worker id, what ``Message.claimed_by`` records, so
    a claim links to the process holding it. ``counts`` are the process's
    cumulative counters (and its handler-duration histogram) as of
    ``last_seen_at``: ``/metrics`` exposes them per worker (pushed through the
    database, docs/observability.md says why). A row not seen for the expiry
    time is stale and deleted by the next heartbeat of any process."""

    id = models.CharField(max_length=128, primary_key=True)
    kind = models.CharField(max_length=32)
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    queues = models.JSONField(default=list)
    version = models.CharField(max_length=32)
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    counts = models.JSONField(default=dict)

    class Meta:
        ordering = ["kind", "id"]
        verbose_name = "worker"
        indexes = [models.Index(fields=["last_seen_at"], name="qp_worker_last_seen")]

    def __str__(self) -> str:
        return f"{self.kind} {self.id}"
