"""ASGI entry point (the production server: ``uvicorn queueproject.asgi:application``)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queueproject.settings")
django.setup(set_prefix=False)

from queueproject.asgi_handler import Handler  # noqa: E402  (needs the apps loaded)

application = Handler()
