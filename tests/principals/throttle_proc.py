"""One web process's throttle, run as a real process for the throttling tests:

    python -m tests.principals.throttle_proc KEY LIMIT REQUESTS GO_FILE

With the test database from ``tests.conftest.subprocess_env()``. Prints
"ready", waits until GO_FILE exists (so all processes start together), asks
the throttle REQUESTS times for KEY at LIMIT per hour, and prints how many it
admitted.
"""

from __future__ import annotations

import os
import sys
import time


def main() -> None:
    key, limit, requests, go_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queueproject.settings_test")
    import django

    django.setup()
    from django.db import connection
    from rest_framework.request import Request
    from rest_framework.test import APIRequestFactory

    from principals.throttling import PrincipalRateThrottle

    connection.ensure_connection()
    request = Request(APIRequestFactory().get("/"))
    request.auth = type("Token", (), {"pk": key})()
    print("ready", flush=True)
    while not os.path.exists(go_file):
        time.sleep(0.005)
    admitted = 0
    for _ in range(requests):
        throttle = PrincipalRateThrottle()  # DRF makes one per request
        throttle.num_requests, throttle.duration = limit, 3600
        admitted += throttle.allow_request(request, None)
    print(admitted, flush=True)


if __name__ == "__main__":
    main()
