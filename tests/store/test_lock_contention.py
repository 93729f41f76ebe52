"""Contention on one lock from several real processes: at no moment do two
hold it, and the fencing tokens grow with every acquisition.

Each contender (``tests.store.lock_contender``) records every holding it can
prove — (token, owner, started, ended) — in a recorder table. Sorted by start,
holdings never overlap and their tokens strictly increase.
"""

from __future__ import annotations

import subprocess
import sys
from itertools import pairwise
from typing import Any

import pytest
from django.db import connection

from tests.conftest import ROOT, is_postgres, subprocess_env
from tests.factories import GroupFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def recorder():
    with connection.cursor() as cur:
        cur.execute(
            "CREATE TABLE lock_recorder (token bigint NOT NULL, owner varchar(64) NOT NULL, "
            "started double precision NOT NULL, ended double precision NOT NULL)"
        )
    yield
    with connection.cursor() as cur:
        cur.execute("DROP TABLE lock_recorder")


def run_contenders(tmp_path: Any, *, processes: int, seconds: float) -> list[tuple]:
    group = GroupFactory(slug="contention")
    go_file = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.store.lock_contender",
                str(group.pk),
                str(i),
                str(go_file),
                str(seconds),
            ],
            cwd=ROOT,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    for proc in procs:  # every contender is connected and waiting
        assert proc.stdout and proc.stderr
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    go_file.touch()
    for proc in procs:
        _, stderr = proc.communicate(timeout=seconds + 120)
        assert proc.returncode == 0, stderr
    with connection.cursor() as cur:
        cur.execute("SELECT token, owner, started, ended FROM lock_recorder ORDER BY started")
        return cur.fetchall()


def assert_one_holder_at_a_time(rows: list[tuple], *, processes: int) -> None:
    assert len(rows) >= 10, "too little contention to prove anything"
    assert len({owner for _, owner, _, _ in rows}) >= min(processes, 2), "one contender took all"
    assert all(started <= ended for _, _, started, ended in rows)
    for (token, owner, _, ended), (next_token, next_owner, next_started, _) in pairwise(rows):
        assert ended < next_started, f"{owner} (token {token}) overlaps {next_owner}"
        assert token < next_token, f"token {next_token} of {next_owner} is not above {token}"


@pytest.mark.postgres
def test_lock__8_processes_on_postgres_never_hold_it_together(tmp_path, recorder):
    rows = run_contenders(tmp_path, processes=8, seconds=8)
    assert_one_holder_at_a_time(rows, processes=8)


@pytest.mark.slow
@pytest.mark.postgres
def test_lock__8_processes_on_postgres_for_20_s_never_hold_it_together(tmp_path, recorder):
    rows = run_contenders(tmp_path, processes=8, seconds=20)
    assert_one_holder_at_a_time(rows, processes=8)


def test_lock__3_processes_never_hold_it_together(tmp_path, recorder):
    if is_postgres():
        pytest.skip("the PostgreSQL variant runs 8 processes")
    rows = run_contenders(tmp_path, processes=3, seconds=4)
    assert_one_holder_at_a_time(rows, processes=3)
