"""Settings for the test suite and the worker subprocesses it starts.

The production settings refuse the development SECRET_KEY when DEBUG is off;
tests run with DEBUG off (as production does) and a throwaway key.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production")
os.environ["DEBUG"] = "0"

from queueproject.settings import *  # noqa: F403
from queueproject.settings import REST_FRAMEWORK

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
REST_FRAMEWORK = {
    **REST_FRAMEWORK,
    "DEFAULT_THROTTLE_RATES": {"principal": os.environ.get("API_THROTTLE_RATE", "100000/min")},
}
# queueproject.sse: run the waiting views' database work in the test's own
# thread (the test transaction's connection), not on the shared pool.
SSE_DB_THREADS = 0
