"""Write the client's reference (Markdown) from its docstrings:

    python clients/python/tools/reference.py > docs/client-reference.md

``tests/test_client_reference.py`` fails when the committed file is stale."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import queueclient
from queueclient import client, errors, models, worker

SECTIONS = [
    ("Client and queues", client, ["Client", "Queue", "AppQueue", "SessionQueue"]),
    ("Remote worker", worker, ["RemoteWorker"]),
    (
        "Results",
        models,
        [
            "Enqueued",
            "ClaimedMessage",
            "Message",
            "AckResult",
            "AckEntry",
            "QueueStats",
            "Page",
            "Reservation",
        ],
    ),
    (
        "Errors",
        errors,
        [name for name in queueclient.__all__ if isinstance(getattr(errors, name, None), type)],
    ),
]


def doc(obj: object) -> str:
    return inspect.cleandoc(obj.__doc__ or "").strip()


def render() -> str:
    out = ["# `queueclient` reference", "",
           "Generated from the docstrings by `clients/python/tools/reference.py`; do not edit.",
           "", doc(queueclient), "", doc(client), ""]  # fmt: skip
    for title, module, names in SECTIONS:
        out += [f"## {title}", ""]
        if module is worker:
            out += [doc(worker), ""]
        for name in names:
            cls = getattr(module, name)
            signature = "" if module is errors else str(inspect.signature(cls))
            out += [f"### `{name}{signature}`", "", doc(cls), ""]
            for attr, member in vars(cls).items():
                if attr.startswith("_") or not inspect.isfunction(member) or not member.__doc__:
                    continue
                out += [f"- **`{attr}{inspect.signature(member)}`**: "
                        + " ".join(doc(member).split())]  # fmt: skip
            out.append("")
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
