from typing import Any

from principals.services import app_get
from queueproject.commands import ServiceCommand
from sessionqueues import services


class Command(ServiceCommand):
    help = "Create a task of an app. The task id is printed alone on the last line."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--app", required=True, help="app slug or id")
        parser.add_argument("--title", default="")

    def run(self, *args: Any, **opts: Any) -> None:
        app = app_get(ref=opts["app"])
        task = services.task_create(app=app, title=opts["title"])
        self.stdout.write(f"Created task {task.title or '(untitled)'} of app {app.slug}:")
        self.stdout.write(str(task.pk))
