"""Rules written once (issue 11): a second spelling of one of them in the
product code fails here. Claim order and setting ranges have their own pins
(tests/groupqueues/test_claim_order.py, test_settings_ranges.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("principals", "queueproject", "groupqueues", "sessionqueues", "store")


def _sources() -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    }


def _files_matching(pattern: str) -> set[str]:
    return {name for name, text in _sources().items() if re.search(pattern, text)}


def test_notify_channel_names__are_built_in_the_models_only():
    assert _files_matching(r"notify\.channel\(") == {
        "groupqueues/models.py",
        "sessionqueues/models.py",
        "store/models.py",
    }


def test_backoff__exponential_growth_is_written_in_backoff_py_only():
    # base * 2 ** attempt (any spacing, int or float two) outside the one formula
    assert _files_matching(r"\*\s*2(\.0)?\s*\*\*\s*\(?\s*[a-z_]") == {"queueproject/backoff.py"}


def test_backoff__every_retrying_loop_uses_the_one_formula():
    users = _files_matching(r"\bbackoff_delay\(")
    assert {
        "groupqueues/services/holder.py",
        "sessionqueues/dispatcher.py",
        "queueproject/runner.py",
    } <= users


def test_malformed_ids__have_one_converter():
    assert _files_matching(r"<uuid:") == set()
    assert "queueproject/ids.py" in _files_matching(r"def parse_id\(")
