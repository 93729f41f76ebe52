"""The test settings plus the recorder app (its ``record`` handler)."""

from queueproject.settings_test import *  # noqa: F403
from queueproject.settings_test import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.groupqueues.recorder"]
