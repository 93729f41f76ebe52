"""The production recipe (issue 17 point 7): the ASGI app under the pinned
uvicorn serves the API and its static files with DEBUG off, and the container
recipe (``Dockerfile`` + ``compose.yaml``) is well-formed: ``docker compose
config`` where Docker Compose is installed, else skipped with the reason (the
structural checks below run everywhere)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import httpx
import pytest
import yaml

from tests.blackbox.server import ROOT, free_port, production_env

SERVICES = {"db", "migrate", "web", "worker", "maintenance"}


def _compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    probe = [docker, "compose", "version"] if docker else None
    if probe and subprocess.run(probe, capture_output=True).returncode == 0:
        return [probe[0], "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose__docker_compose_config_accepts_it():
    command = _compose_command()
    if command is None:
        pytest.skip("Docker Compose is not installed here (no `docker compose`, no docker-compose)")
    done = subprocess.run(
        [*command, "-f", str(ROOT / "compose.yaml"), "config", "--quiet"],
        env={"SECRET_KEY": "x" * 50, "PATH": "/usr/bin:/bin:/usr/local/bin"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_compose__postgres_and_the_three_processes_from_one_image():
    spec = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = spec["services"]
    assert set(services) == SERVICES
    assert services["db"]["image"].startswith("postgres:")
    for name in SERVICES - {"db"}:
        url = services[name]["environment"]["DATABASE_URL"]
        assert url.startswith("postgresql://") and "@db:5432/" in url
        assert services[name]["build"] == "."
    assert services["worker"]["command"][-1] == "queue_worker"
    assert services["maintenance"]["command"][-1] == "queue_maintenance"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "requirements.txt" in dockerfile and "requirements-dev" not in dockerfile
    assert "collectstatic" in dockerfile and "uvicorn queueproject.asgi:application" in dockerfile


def test_runtime_requirements__hold_the_server_and_no_test_tools():
    runtime = (ROOT / "requirements.txt").read_text().lower()
    assert "uvicorn==" in runtime and "whitenoise==" in runtime
    assert "pytest" not in runtime and "ruff" not in runtime
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert dev.splitlines()[1:].count("-r requirements.txt") == 1 and "pytest==" in dev


def test_uvicorn__serves_the_api_the_docs_and_static_files_with_debug_off(tmp_path):
    env = production_env(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    port = free_port()
    log = (tmp_path / "uvicorn.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "queueproject.asgi:application",
         "--host", "127.0.0.1", "--port", str(port)],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        schema = None
        while schema is None:
            assert process.poll() is None, (tmp_path / "uvicorn.log").read_text()
            try:
                schema = httpx.get(f"{base}/api/schema/", timeout=5)
            except httpx.TransportError:
                assert time.monotonic() < deadline, (tmp_path / "uvicorn.log").read_text()
                time.sleep(0.2)
        assert schema.status_code == 200
        assert httpx.get(f"{base}/api/docs/").status_code == 200
        css = httpx.get(f"{base}/static/admin/css/base.css")
        assert css.status_code == 200 and "text/css" in css.headers["content-type"]
        unauthenticated = httpx.get(f"{base}/api/groups/")
        assert unauthenticated.status_code in (401, 403, 404)
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()
