"""The client's generated reference (docs/client-reference.md) matches its
docstrings: regenerate with ``python clients/python/tools/reference.py``."""

from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_reference_is_up_to_date() -> None:
    tool = runpy.run_path(str(ROOT / "clients/python/tools/reference.py"))
    committed = (ROOT / "docs/client-reference.md").read_text()
    assert committed == tool["render"](), (
        "docs/client-reference.md is stale: "
        "python clients/python/tools/reference.py > docs/client-reference.md"
    )
