"""The one build step pyproject.toml cannot say: the project's top-level
``templates/`` (admin overrides, the offline Redoc page) is found through
``TEMPLATES["DIRS"]`` in this checkout, and ships inside the wheel as
``queueproject/templates/`` so that an embedding project finds it through
``APP_DIRS`` (list ``queueproject`` before ``django.contrib.admin``)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

TEMPLATES = Path(__file__).resolve().parent / "templates"


class BuildPyWithTemplates(build_py):
    def run(self) -> None:
        super().run()
        if TEMPLATES.is_dir():
            target = Path(self.build_lib) / "queueproject" / "templates"
            shutil.copytree(TEMPLATES, target, dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildPyWithTemplates})
