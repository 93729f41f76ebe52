"""A publisher for the outbox crash tests, run as a real process:

    python -m tests.store.outbox_publisher GROUP_SLUG APP_SLUG READY_FILE (commit|hang)

With the test database from ``tests.conftest.subprocess_env()``. Inside one
``transaction.atomic()`` it writes a business row (an app named APP_SLUG) and
publishes an outbox row to the group's ``emails`` queue, then writes
READY_FILE. ``commit``: leaves the block (commits) and exits 0. ``hang``:
sleeps inside the block until the test SIGKILLs it, so the process dies
between the write and the commit.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def main() -> None:
    group_slug, app_slug, ready_file, mode = sys.argv[1:5]
    import django

    django.setup()
    from django.db import transaction

    from principals.models import App, Group
    from store import outbox

    group = Group.objects.get(slug=group_slug)
    with transaction.atomic():
        App.objects.create(slug=app_slug, name=app_slug, group=group)
        outbox.publish(f"queue:{group_slug}/emails", {"app": app_slug})
        Path(ready_file).write_text("written")
        if mode == "hang":
            time.sleep(120)


if __name__ == "__main__":
    main()
