"""The client is a distribution of its own: its wheel holds the package and
asks for httpx only (nothing of Django or of the project)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_client_wheel_builds_with_httpx_as_its_only_dependency(tmp_path: Path) -> None:
    # Built from a copy: a build leaves build/ and *.egg-info beside the sources.
    source = tmp_path / "src"
    shutil.copytree(
        ROOT / "clients/python", source, ignore=shutil.ignore_patterns("build", "*.egg-info")
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(tmp_path), str(source)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("durable_queues_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = [line for line in archive.read(metadata).decode().splitlines()
                    if line.startswith("Requires-Dist:")]  # fmt: skip
    assert {"queueclient/client.py", "queueclient/worker.py", "queueclient/py.typed"} <= set(names)
    assert not any(n.startswith(("groupqueues/", "queueproject/")) for n in names)
    assert len(requires) == 1 and requires[0].startswith("Requires-Dist: httpx")
