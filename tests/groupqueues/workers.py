"""Helpers for tests that run ``queue_worker`` / ``queue_maintenance`` as real
subprocesses against the test database."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

from tests.conftest import manage_cmd, subprocess_env

TIMEOUT = 60


def run_command(*args: str, timeout: float = TIMEOUT, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        manage_cmd(*args),
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Started:
    """A running command whose output goes to temporary files (a pipe nobody
    reads would fill up and block the worker's logging)."""

    def __init__(self, *args: str, wrap: Callable[[list[str]], list[str]] | None = None,
                 **env: str) -> None:  # fmt: skip
        """``wrap``: turns the command line into the one to run (e.g. inside
        a network namespace: ``Host.command`` of tests/groupqueues/netns.py)."""
        self.paths = [tempfile.mkstemp(prefix="worker-", suffix=f".{n}")[1] for n in ("out", "err")]
        self.out, self.err = (open(p, "w") for p in self.paths)  # noqa: SIM115
        argv = manage_cmd(*args)
        self.proc = subprocess.Popen(
            wrap(argv) if wrap else argv,
            env=subprocess_env(**env),
            stdout=self.out,
            stderr=self.err,
            text=True,
        )

    def send_signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def poll(self) -> int | None:
        return self.proc.poll()

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def communicate(self, timeout: float = TIMEOUT) -> tuple[str, str]:
        """Wait for the exit (killing it after ``timeout``); (stdout, stderr)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        return self.read()

    def read(self) -> tuple[str, str]:
        """What it wrote so far (readable while it runs)."""
        texts = []
        for path in self.paths:
            with open(path) as f:
                texts.append(f.read())
        return texts[0], texts[1]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def start_command(*args: str, **env: str) -> Started:
    return Started(*args, wrap=None, **env)


def outcome_lines(stderr: str) -> list[dict[str, Any]]:
    """The worker's structured outcome records, one per message (a batch line
    of acked messages counts once for each: ``per_message``)."""
    records = []
    for line in stderr.splitlines():
        start = line.find('{"event": "message')  # "message" and "messages"
        if start >= 0:
            records.append(json.loads(line[start:]))
    return per_message(records)


def per_message(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Outcome records with every batch line (``"event": "messages"``: the
    acked messages' ids, attempts and durations as parallel lists; see
    docs/observability.md) spelled out as one ``"event": "message"`` record
    per message; other records as they are."""
    out = []
    for record in records:
        if record.get("event") != "messages":
            out.append(record)
            continue
        batch = dict(record)
        ids, attempts, durations = batch.pop("ids"), batch.pop("attempts"), batch.pop("duration_ms")
        assert batch.pop("count") == len(ids) == len(attempts) == len(durations), record
        for id_, attempt, duration in zip(ids, attempts, durations, strict=True):
            out.append({**batch, "event": "message", "id": id_, "attempt": attempt,
                        "duration_ms": duration})  # fmt: skip
    return out


def wait_for(predicate: Any, timeout: float = 20.0, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")
