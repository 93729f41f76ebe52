"""Message ids: UUID version 7 built without ``UUID.__init__`` (models.new_message_ids)."""

from __future__ import annotations

import copy
import pickle
import time
import uuid

from groupqueues.models import new_message_id, new_message_ids


def test_ids__are_ordinary_version_7_uuids():
    before = time.time_ns() // 1_000_000
    ids = new_message_ids(500)
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == 500
    for value in ids:
        same = uuid.UUID(int=value.int)  # what UUID.__init__ would have built
        assert type(value) is uuid.UUID
        assert (value, hash(value), str(value), repr(value)) == (same, hash(same), str(same),
                                                                 repr(same))  # fmt: skip
        assert value.is_safe == same.is_safe
        assert pickle.loads(pickle.dumps(value)) == value
        assert copy.deepcopy(value) == value
        assert uuid.UUID(str(value)) == value
        assert (value.version, value.variant) == (7, uuid.RFC_4122)
        assert before <= value.int >> 80 <= after  # the Unix time in ms
    assert ids == sorted(ids)  # rising within a call: inserts land at the index's edge


def test_ids__differ_between_calls():
    assert len({new_message_id() for _ in range(1000)}) == 1000
