from django.apps import AppConfig


class QueueProjectTestsConfig(AppConfig):
    """Installed only by tests that need an app of their own (its own label)."""

    name = "tests.queueproject"
    label = "queueproject_tests"
