"""``pip install`` works (issue 17 point 8): the wheel builds from a copy of
the checkout, installs (``--no-deps``) into a scratch virtual environment that
borrows the project's installed dependencies through a ``.pth`` file, and a
minimal Django project of its own, made from the two blocks of
``docs/embedding.md`` verbatim, migrates, enqueues one message and drains it
with ``queue_worker``; the project's source tree is never on its path.

On PostgreSQL runs the scratch project uses a database of its own
(``<run's database>_whl``), else a SQLite file."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from tests.blackbox.server import ROOT, postgres_create, postgres_drop, postgres_url

PACKAGES = ("principals", "queueproject", "groupqueues", "sessionqueues", "store")
BLOCK = re.compile(r"```python\n# (settings|urls)\.py \(add\)\n(.*?)```", re.S)
IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.sqlite3*", "staticfiles", "build", "dist", "*.egg-info",
    ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", "tests", "bench",
)  # fmt: skip

BASE_SETTINGS = """\
SECRET_KEY = "wheel-test-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
ROOT_URLCONF = "hostsite.urls"
USE_TZ = True
STATIC_URL = "static/"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
"""

CHECK = """
from django.template.loader import get_template
from django.urls import resolve
import groupqueues, queueproject
from groupqueues import services
from groupqueues.models import Message
from principals.models import Group
origin = get_template("queueproject/redoc.html").origin.name
assert "site-packages" in origin, origin
assert "site-packages" in groupqueues.__file__, groupqueues.__file__
resolve("/queues/api/groups/acme/queues/jobs/claim/")
queue = services.collection_get(group=Group.objects.get(slug="acme"), name="jobs")
if "{step}" == "enqueue":
    services.message_enqueue(collection=queue, payload={{"hello": "wheel"}}, enqueued_by="test")
print("messages:", Message.objects.filter(collection=queue).count())
"""


def _block(name: str) -> str:
    text = (ROOT / "docs" / "embedding.md").read_text()
    return {kind: body for kind, body in BLOCK.findall(text)}[name]


def _site_packages(python: Path) -> str:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_wheel__installs_into_a_fresh_project_that_migrates_enqueues_and_drains(tmp_path):
    # 1. Build the wheel from a copy (the build leaves nothing in the checkout).
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=IGNORE)
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--quiet", "-w", str(dist), str(source)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = dist.glob("durable_queues-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for package in PACKAGES:
        assert f"{package}/__init__.py" in names
    assert "groupqueues/migrations/0001_initial.py" in names
    assert "queueproject/templates/queueproject/redoc.html" in names
    shipped = {n.removeprefix("queueproject/templates/") for n in names if "/templates/" in n}
    for template in (ROOT / "templates").rglob("*.html"):  # every project template ships
        assert str(template.relative_to(ROOT / "templates")) in shipped, template

    # 2. A scratch venv: the wheel alone, the dependencies borrowed from ours.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    ours = sysconfig.get_paths()["purelib"]
    Path(_site_packages(python), "borrowed-deps.pth").write_text(ours + "\n")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]

    # 3. A minimal project of its own, from docs/embedding.md.
    site = tmp_path / "site"
    (site / "hostsite").mkdir(parents=True)
    (site / "hostsite" / "__init__.py").write_text("")
    pg = postgres_url()
    name = f"{pg.rsplit('/', 1)[-1].split('?')[0]}_whl" if pg else ""
    database = repr(postgres_create(pg, name)) if pg else repr(f"sqlite:///{site / 'db.sqlite3'}")
    (site / "hostsite" / "settings.py").write_text(
        "import environ\n"
        + BASE_SETTINGS
        + f"DATABASES = {{'default': environ.Env.db_url_config({database})}}\n"
        + _block("settings")
    )
    (site / "hostsite" / "urls.py").write_text(
        "from django.contrib import admin\nfrom django.urls import path\n\n"
        'urlpatterns = [path("admin/", admin.site.urls)]\n' + _block("urls")
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    env.update(DJANGO_SETTINGS_MODULE="hostsite.settings", PYTHONPATH=str(site))
    env.pop("DATABASE_URL", None)

    def admin(*args: str) -> str:
        done = subprocess.run(
            [python, "-m", "django", *args], cwd=site, env=env,
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, f"django-admin {' '.join(args)}:\n{done.stderr[-3000:]}"
        return done.stdout

    try:
        admin("migrate", "--noinput", "-v0")
        admin("create_group", "acme", "--name", "Acme")
        admin("create_queue", "acme", "jobs")
        assert "messages: 1" in admin("shell", "-c", CHECK.format(step="enqueue"))
        admin("queue_worker", "--queue", "acme/jobs", "--handler", "noop", "--until-empty")
        assert "messages: 0" in admin("shell", "-c", CHECK.format(step="count"))
    finally:
        if pg:
            postgres_drop(pg, name)
