"""``queueproject/`` is the bottom layer: none of its modules imports an app.

Every ``.py`` under ``queueproject/`` is parsed (no import runs), and every
import statement in it, function-level ones included, must name the standard
library, an installed third-party distribution (django, rest_framework,
drf_spectacular, psycopg, …) or ``queueproject`` itself. Anything else is an
app of this project (``principals``, ``groupqueues``, ``sessionqueues``, or
one added later) or another local package (``tests``, ``bench``). Only the
settings files may name apps, as strings (``INSTALLED_APPS``, dotted paths);
elsewhere a dotted path into an app (say for ``import_module``) counts as an
import too.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "queueproject"
SETTINGS_FILES = {SHARED / "settings.py", SHARED / "settings_test.py"}
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


@cache
def local_packages() -> frozenset[str]:
    """Top-level packages (any directory holding Python, with or without an
    ``__init__``) and modules of this repository other than queueproject."""
    found = {p.parent.name for p in ROOT.glob("*/*.py")} | {p.stem for p in ROOT.glob("*.py")}
    return frozenset(name for name in found - {"queueproject"} if name.isidentifier())


@cache
def installed_distributions() -> frozenset[str]:
    return frozenset(importlib.metadata.packages_distributions())


def allowed(top: str) -> bool:
    if top == "queueproject":
        return True
    if top in local_packages():
        return False
    return top in sys.stdlib_module_names or top in installed_distributions()


def module_package(path: Path) -> list[str]:
    """The dotted package of ``path`` as a list (``queueproject/management/x.py`` →
    ``["queueproject", "management"]``; a package's ``__init__`` is its own package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return parts[:-1]


def imported_tops(path: Path, tree: ast.AST) -> list[tuple[int, str]]:
    """(line, top-level package) of every import in ``tree``, relative ones resolved."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            package = module_package(path)
            base = package[: len(package) - node.level + 1]
            found.append((node.lineno, base[0] if base else "<beyond the repository>"))
        elif isinstance(node, ast.ImportFrom):
            assert node.module is not None  # only a relative import may omit it
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes (prose, not references)."""
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, owners)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def app_paths_named(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, string) of every string constant that is a dotted path into a local package."""
    prose = docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in prose
        and DOTTED.fullmatch(node.value)
        and node.value.split(".")[0] in local_packages()
    ]


def violations(path: Path, source: str) -> list[str]:
    """What is wrong with ``source``, the text of the module at ``path``."""
    tree = ast.parse(source, filename=str(path))
    where = path.relative_to(ROOT)
    found = [f"{where}:{line} imports {top}" for line, top in imported_tops(path, tree)]
    found = [v for v in found if not allowed(v.rsplit(" ", 1)[1])]
    if path not in SETTINGS_FILES:
        found += [f"{where}:{line} names {value!r}" for line, value in app_paths_named(tree)]
    return found


def test_local_packages__are_the_apps_and_other_local_packages():
    # The rule below means something only if the apps are recognised as local.
    assert {"principals", "groupqueues", "sessionqueues", "tests"} <= local_packages()
    assert {"django", "rest_framework", "drf_spectacular", "psycopg"} <= installed_distributions()


def test_queueproject__imports_no_app():
    files = sorted(SHARED.rglob("*.py"))
    assert SHARED / "throttling.py" not in files  # moved to principals/
    assert len(files) > 20
    assert [v for path in files for v in violations(path, path.read_text())] == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from principals import sql", ["imports principals"]),
        ("def f():\n    import groupqueues.sql", ["imports groupqueues"]),
        ("def f():\n    from sessionqueues.models import Task", ["imports sessionqueues"]),
        ("from tests.factories import GroupFactory", ["imports tests"]),
        ("from .... import principals", ["imports <beyond the repository>"]),
        ("MODULES = ['principals.demo']", ["names 'principals.demo'"]),
        ("import_module('groupqueues')", ["names 'groupqueues'"]),
        ('"""principals.demo"""\nfrom . import clock\nimport os, django, psycopg', []),
        ("from rest_framework.throttling import BaseThrottle\nimport httpx, environ", []),
    ],
)
def test_violations__catches_every_way_of_importing_an_app(source, expected):
    # As if it were a module at queueproject/management/commands/ (never written).
    path = SHARED / "management" / "commands" / "layering_probe.py"
    assert [v.split(" ", 1)[1] for v in violations(path, source)] == expected
