"""One way to route ids: every id in an API path goes through <api_id:…>."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.urls import URLResolver, get_resolver

from queueproject.ids import IdConverter, parse_id

ROOT = Path(__file__).resolve().parents[2]


def test_parse_id__canonical_uuids_only():
    value = uuid.uuid4()
    assert parse_id(str(value)) == value
    assert parse_id(str(value).upper()) == value
    assert parse_id(value) is value
    for bad in ["not-a-uuid", value.hex, f"{{{value}}}", f"urn:uuid:{value}", "", 7, None]:
        with pytest.raises(ValueError):
            parse_id(bad)


def test_no_urls_module_uses_another_uuid_converter():
    modules = [p for p in ROOT.glob("*/urls.py") if ".venv" not in p.parts]
    assert modules
    for module in modules:
        assert "<uuid:" not in module.read_text(), module


def _patterns(resolver: URLResolver, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            yield from _patterns(entry, prefix + str(entry.pattern))
        else:
            yield prefix + str(entry.pattern), entry


def test_every_id_in_an_api_path_uses_the_id_converter():
    checked = 0
    for route, pattern in _patterns(get_resolver()):
        if not route.startswith("api/"):
            continue
        converters = getattr(pattern.pattern, "converters", {})
        for name in re.findall(r"<(?:\w+:)?(\w+)>", route):
            if name == "id" or name.endswith("_id"):
                assert isinstance(converters.get(name), IdConverter), (route, name)
                checked += 1
    assert checked >= 10
