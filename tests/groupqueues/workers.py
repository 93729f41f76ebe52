"""Helpers for tests that run ``queue_worker`` / ``queue_maintenance`` as real
subprocesses against the test database."""

from __future__ import annotations

import json
import subprocess
import time
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


def start_command(*args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        manage_cmd(*args),
        env=subprocess_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def outcome_lines(stderr: str) -> list[dict[str, Any]]:
    """The worker's structured outcome lines."""
    out = []
    for line in stderr.splitlines():
        start = line.find('{"event": "message"')
        if start >= 0:
            out.append(json.loads(line[start:]))
    return out


def wait_for(predicate: Any, timeout: float = 20.0, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")
