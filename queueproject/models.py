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
