from typing import Any

from queueproject.commands import ServiceCommand
from sessionqueues import selectors, services


class Command(ServiceCommand):
    help = "Create a session of a task. The session id is printed alone on the last line."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--task", required=True, help="task id")

    def run(self, *args: Any, **opts: Any) -> None:
        task = selectors.task_get(task_id=opts["task"])
        session = services.session_create(task=task)
        self.stdout.write(
            f"Created session of task {task.pk} (incarnation {session.incarnation_id}):"
        )
        self.stdout.write(str(session.pk))
