"""Demo queues for ``seed_demo`` (idempotent): ``emails`` and ``thumbnails`` on
group ``acme`` (so the apps ``storefront`` and ``billing`` both resolve them),
with a few messages when the queue is created, so re-running adds nothing.
``seed_demo`` then runs the demo triggers of ``demo_consumers`` (``DEMO_SEEDS``)."""

from typing import Any

from groupqueues import demo_consumers, demo_states, services
from groupqueues.models import Collection
from principals.models import Group

# After the principals demo, whose group ``acme`` owns the queues.
DEMO_ORDER = 20

DEMO_QUEUES: dict[str, dict[str, Any]] = {
    "emails": {"default_max_attempts": 5, "visibility_timeout": 60},
    "thumbnails": {"visibility_timeout": 300, "max_depth": 10_000},
}
DEMO_MESSAGES: dict[str, list[dict[str, Any]]] = {
    "emails": [
        {"to": "ann@example.com", "template": "welcome"},
        {"to": "bob@example.com", "template": "invoice", "invoice": 1042},
        {"to": "eve@example.com", "template": "password-reset"},
    ],
    "thumbnails": [
        {"image": "products/kettle.jpg", "sizes": [64, 256]},
        {"image": "products/teapot.jpg", "sizes": [64, 256, 1024]},
    ],
}


def seed(*, admin_user: Any, log: Any) -> None:
    acme = Group.objects.filter(slug="acme").first()
    if acme is None:  # the principals demo did not run
        return
    for name, settings in DEMO_QUEUES.items():
        if Collection.objects.filter(group=acme, name=name).exists():
            # Only with a new queue: the demo worker drains these (acked
            # messages are deleted, keys and all), so a re-run would add them again.
            continue
        queue = services.collection_create(group=acme, name=name, **settings)
        log(f"queue acme/{name}")
        messages = [
            services.NewMessage(payload=payload, idempotency_key=f"demo-{name}-{i}")
            for i, payload in enumerate(DEMO_MESSAGES[name])
        ]
        results = services.message_enqueue_batch(
            collection=queue, messages=messages, enqueued_by="server"
        )
        if created := sum(r.created for r in results):
            log(f"{created} messages in acme/{name}")


DEMO_SEEDS = [seed, demo_consumers.seed, demo_states.seed]
