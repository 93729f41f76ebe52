"""The side-by-side harness's project lines on SQLite (issue 13; not a test).

    cd /tmp/peers/peers && ../.venv/bin/python /path/to/bench/sqlite_peer.py \
        --project /path/to/checkout --project-python /path/to/checkout/.venv/bin/python \
        [--phases enqueue,bulk,drain1,drain2,latency] [--runs 2] [--tag T]

Run it from the harness's ``peers/`` directory (a copy of /work/shared/peers,
see its README) with the harness's interpreter: it is ``run_project.py``
(``ProjectPeer``: enqueue through ``groupqueues.services`` in the project's
own interpreter, workers ``manage.py queue_worker --handler rec --batch 100``,
the same phases, payloads and completion rule in ``common.py``) with the
database a fresh SQLite file instead of a PostgreSQL database. There is no
peer to set beside it: PgQueuer and pgbench are PostgreSQL only. Workers poll
SQLite every ``QUEUE_WORKER_POLL_INTERVAL`` (default 0.5 s; set it in the
environment to change it), so the latency line measures the poll interval.
Results: ``results/project-sqlite[-TAG].json``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.getcwd())  # the harness's peers/ directory

import common  # type: ignore[import-not-found]  # the harness's, from the cwd
import run_project  # type: ignore[import-not-found]


class SQLitePeer(run_project.ProjectPeer):  # type: ignore[misc]  # untyped harness
    name = "project-sqlite"
    db = "perf_sqlite_peer_unused"  # common.main drops this PostgreSQL name at the end

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.path = Path(tempfile.gettempdir()) / f"perf_sqlite_peer_{os.getpid()}.sqlite3"
        self.env["DATABASE_URL"] = f"sqlite:///{self.path}"
        self.notes: list[str] = [*self.notes, f"SQLite file {self.path} (WAL); workers poll"]

    def setup(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        self.agent = subprocess.Popen(
            [self.py, str(common.HERE / "djq" / "agent.py")], cwd=self.proj, env=self.env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.ask("setup")

    def close(self) -> None:
        super().close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


if __name__ == "__main__":
    common.main(SQLitePeer, run_project.extra)
