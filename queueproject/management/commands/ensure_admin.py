"""Make sure a superuser exists for a first look at /admin/ and print its login.

The password is generated once and kept in ``.demo-admin-password`` beside
manage.py (git-ignored), so every run prints the same working login.
"""

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create (or reset) the demo superuser and print its login."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, **opts: Any) -> None:
        path = Path(settings.BASE_DIR) / ".demo-admin-password"
        password = path.read_text().strip() if path.exists() else secrets.token_urlsafe(12)
        User = get_user_model()
        user = User.objects.filter(username=opts["username"]).first()
        if user is None:
            User.objects.create_superuser(opts["username"], "", password)
        elif not user.check_password(password):
            user.set_password(password)
            user.is_staff = user.is_superuser = user.is_active = True
            user.save()
        path.write_text(password + "\n")
        self.stdout.write(f"Admin login: {opts['username']} / {password}")
