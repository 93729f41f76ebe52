"""A test app for worker subprocesses: its ``consumers`` module registers the
``record`` handler. Worker subprocesses get it with
``DJANGO_SETTINGS_MODULE=tests.groupqueues.recorder.settings``."""
