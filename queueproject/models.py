"""Project-wide store primitives shared by the queue engines."""

from django.db import models


class Lease(models.Model):
    """A TTL lock: held by ``owner`` until ``expires_at``. Used to elect one
    leader (maintenance, schedulers) among many processes; see
    ``queueproject.leases`` for the operations."""

    name = models.CharField(max_length=200, primary_key=True)
    owner = models.CharField(max_length=200)
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} held by {self.owner} until {self.expires_at:%H:%M:%S}"
