"""Every shell block of README.md runs verbatim right after ``make run``
(issue 17 point 1).

The test starts the product the way ``make run`` does (``scripts/run.sh``:
migrations, the demo admin, ``seed_demo``, the web server and the demo worker)
on a database of its own (a temp SQLite file, or ``<run's database>_readme``
on PostgreSQL), then runs the README's blocks in order in ONE bash process
(``set -euo pipefail``: variables set by a block are there for the next, and
a failing command fails the test), from the repository root.

Which blocks run:
- a fenced block whose info string is ``sh``, ``bash`` or ``shell`` runs;
- ``sh no-run`` (any info string with the word ``no-run`` after the language)
  is shown but not run: for commands that never return (``make run``,
  ``queue_worker`` without ``--until-empty``), need another machine (Docker,
  PgBouncer) or are examples with values to fill in;
- a block right after the HTML comment ``<!-- no-run -->`` is not run either;
- blocks in other languages (``python``, ``text``, none) are not run.

The one change made to a block: ``127.0.0.1:8000`` becomes the test server's
address (port 8000 may be taken on a shared machine). A block that cannot run
verbatim must be marked, not left to fail: the point is that a reader can
paste every unmarked block as it is.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.blackbox.server import ROOT, free_port, postgres_create, postgres_drop, postgres_url

RUN_LANGUAGES = {"sh", "bash", "shell"}
NO_RUN = "no-run"
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```\s*$", re.M | re.S)
START_TIMEOUT = 180.0  # migrations + demo data on a shared machine


@dataclass(frozen=True)
class Block:
    line: int
    body: str


def runnable_blocks(text: str) -> list[Block]:
    """The README's blocks that run, in order (the rules in the module docstring)."""
    found = []
    for match in FENCE.finditer(text):
        words = match["info"].split()
        before = text[: match.start()].rstrip().splitlines()
        marked = bool(before) and before[-1].strip() == f"<!-- {NO_RUN} -->"
        if words and words[0] in RUN_LANGUAGES and NO_RUN not in words[1:] and not marked:
            found.append(Block(text.count("\n", 0, match.start()) + 1, match["body"]))
    return found


def test_runnable_blocks__follow_the_markers():
    text = (
        "```sh\necho one\n```\n```sh no-run\nmake run\n```\n<!-- no-run -->\n```sh\nx\n```\n"
        "```python\nprint()\n```\n```bash\necho two\n```\n"
    )
    assert [b.body for b in runnable_blocks(text)] == ["echo one\n", "echo two\n"]


@pytest.fixture(scope="module")
def product(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str], Path]]:
    """``scripts/run.sh`` on a database of its own; yields (base URL, its output)."""
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv: the README's commands use .venv/bin/python (make test makes it)")
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    tmp_path = tmp_path_factory.mktemp("readme")
    pg = postgres_url()
    name = f"{pg.rsplit('/', 1)[-1].split('?')[0]}_readme" if pg else ""
    database = postgres_create(pg, name) if pg else f"sqlite:///{tmp_path / 'db.sqlite3'}"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    env.update(DATABASE_URL=database, PORT=str(port), PYTHONUNBUFFERED="1")
    log_path = tmp_path / "run.log"
    log = log_path.open("w")
    process = subprocess.Popen(
        ["scripts/run.sh"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while "== admin:" not in log_path.read_text() or "Admin login" not in log_path.read_text():
            assert process.poll() is None, log_path.read_text()[-5000:]
            assert time.monotonic() < deadline, log_path.read_text()[-5000:]
            time.sleep(0.3)
        httpx.get(f"{base}/api/schema/", timeout=30).raise_for_status()
        yield base, env, log_path
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)  # run.sh forwards it to the server and worker
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()
        if pg:
            postgres_drop(pg, name)


def test_make_run__prints_the_urls_and_the_admin_login_last(product):
    _, _, log_path = product
    lines = log_path.read_text().splitlines()
    login = next(i for i, line in enumerate(lines) if line.startswith("== Admin login: "))
    started = next(i for i, line in enumerate(lines) if "consumer(s)" in line)
    assert started < login, "the worker's start-up lines pushed the login up"
    ours = [line for line in lines if line.startswith("== ")]
    assert ours[-1].startswith("== Admin login: admin / "), ours
    assert any("/admin/" in line for line in ours[-4:-1]), ours
    assert any("/api/docs/" in line for line in ours[-4:-1]), ours


def test_readme__every_shell_block_runs_verbatim(product, tmp_path):
    base, env, log_path = product
    blocks = runnable_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 5, "the README lost its runnable examples"
    script = ["set -euo pipefail"]
    for n, block in enumerate(blocks, 1):
        body = block.body.replace("http://127.0.0.1:8000", base)
        marker = f"=== README block {n} (README.md line {block.line}) at"
        script.append(f'echo "{marker} ${{SECONDS}} s"')
        script.append(body)
    script.append("echo '=== all README blocks ran'")
    (tmp_path / "readme.sh").write_text("\n".join(script) + "\n")
    done = subprocess.run(
        ["bash", str(tmp_path / "readme.sh")], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "=== all README blocks ran" in done.stdout, (
        f"a README block failed (the last '=== README block' line names it):\n{output[-6000:]}"
        f"\n--- server:\n{log_path.read_text()[-3000:]}"
    )
    # The walk-through claimed the message it enqueued and acked it.
    assert '"invoice": 1042' in done.stdout or '"invoice":1042' in done.stdout, done.stdout


LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_and_docs__link_only_to_files_in_the_repository():
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        assert "../shared" not in text and "SPEC.md" not in text, page
        for target in LINK.findall(text):
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"
