"""The payload checks: the fast path (flat payloads, judged from their
serialisation) must accept and refuse exactly what the full walk does."""

from __future__ import annotations

import json

import pytest

from groupqueues import validation as check
from groupqueues.exceptions import InvalidQueueInput


@pytest.mark.parametrize(
    "payload",
    [
        None, 1, -2.5, 2**70, True, "text", "é ✓", "back\\u0000slash", {}, [],
        {"i": 1, "s": "é", "n": None, "f": 0.5, "b": False},
        {"nested": {"list": [1, [2, {"x": "y"}]]}},
    ],
)  # fmt: skip
def test_payload_json__storable_payload_is_compact_json(payload):
    text = check.payload_json(payload, max_depth=64)
    assert text == json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(text) == payload


@pytest.mark.parametrize(
    "payload",
    [
        {1: "int key"}, {None: 1}, {"a": {2: "nested int key"}},
        "a\x00b", {"k": "a\x00b"}, {"a\x00": 1},
        "\ud800", {"k": "\udfff"}, {"\ud800": 1},
        float("nan"), {"k": float("inf")}, {"k": object()}, {"k": b"bytes"},
    ],
)  # fmt: skip
def test_payload_json__unstorable_payload_is_invalid(payload):
    with pytest.raises(InvalidQueueInput) as exc:
        check.payload_json(payload, max_depth=64, index=3)
    assert exc.value.details["index"] == 3


def test_payload_json__depth_is_limited_on_every_path():
    assert check.payload_json({"a": 1}, max_depth=1) == '{"a":1}'
    assert check.payload_json(5, max_depth=0) == "5"
    for payload, depth in (({"a": 1}, 0), ([[1]], 1), ({"a": {"b": 1}}, 1)):
        with pytest.raises(InvalidQueueInput):
            check.payload_json(payload, max_depth=depth)
