"""The stream API (SPEC §6): status codes, bodies, bad input, the error codes
``offset_regressed`` / ``offset_out_of_range``, and who may call what
(append = enqueue, read = read, commit = consume, reset/purge/create = manage).

The topic belongs to group ``child`` (root ⊃ child ⊃ grandchild, root ⊃ sibling).
"""

from __future__ import annotations

import pytest

from store import streams
from store.models import StreamConsumer
from store.streams import StreamEntryIn
from tests.groupqueues.api_helpers import (
    ADMIN,
    VIEWER,
    app_client,
    assert_error,
    user_client,
)

pytestmark = pytest.mark.django_db


def url(group, rest="", topic="events"):
    return f"/api/groups/{group.slug}/topics/{topic}/{rest}"


@pytest.fixture
def topic(tree):
    return streams.topic_create(group=tree["child"], name="events")


def fill(topic, n):
    return streams.append(topic=topic, entries=[StreamEntryIn({"n": i}) for i in range(n)])


def test_create__201_with_offsets_and_settings_duplicate_409(tree, admin):
    body = {"name": "orders", "retention_seconds": 3600, "max_entries": 10}
    response = admin.post(f"/api/groups/{tree['child'].slug}/topics/", body, format="json")
    assert response.status_code == 201, response.content
    got = response.json()
    assert (got["name"], got["head_offset"], got["first_offset"], got["retained"]) == (
        "orders", 0, 1, 0,
    )  # fmt: skip
    assert (got["retention_seconds"], got["max_entries"], got["consumers"]) == (3600, 10, [])
    again = admin.post(f"/api/groups/{tree['child'].slug}/topics/", body, format="json")
    assert_error(again, 409, "already_exists")
    listed = admin.get(f"/api/groups/{tree['child'].slug}/topics/").json()
    assert [t["name"] for t in listed["results"]] == ["orders"]


def test_create__bad_input_is_400_with_the_field(tree, admin):
    base = f"/api/groups/{tree['child'].slug}/topics/"
    for body, field in [
        ({"name": "bad name"}, "name"),
        ({"name": "t", "max_entries": 0}, "max_entries"),
        ({"name": "t", "retention_seconds": "1"}, "retention_seconds"),
        ({"name": "t", "colour": "red"}, "colour"),
    ]:
        error = assert_error(admin.post(base, body, format="json"), 400, "invalid")
        assert field in error["details"], (body, error)


def test_append__one_201_offset_repeat_200_batch_201_offsets(topic, tree, editor):
    one = editor.post(url(tree["child"], "entries/"), {"payload": {"a": 1},
                      "idempotency_key": "k"}, format="json")  # fmt: skip
    assert (one.status_code, one.json()) == (201, {"offset": 1})
    repeat = editor.post(url(tree["child"], "entries/"), {"payload": 2, "idempotency_key": "k"},
                         format="json")  # fmt: skip
    assert (repeat.status_code, repeat.json()) == (200, {"offset": 1})
    two = {"entries": [{"payload": "x"}, {"payload": "y"}]}
    batch = editor.post(url(tree["child"], "entries/"), two, format="json")
    assert (batch.status_code, batch.json()) == (201, {"offsets": [2, 3]})


def test_append__bad_input_400_names_the_entry_too_large_413(topic, tree, editor):
    entries = url(tree["child"], "entries/")
    assert_error(editor.post(entries, {}, format="json"), 400, "invalid")
    assert_error(editor.post(entries, {"payload": None}, format="json"), 400, "invalid")
    both = editor.post(entries, {"payload": 1, "entries": [{"payload": 1}]}, format="json")
    assert_error(both, 400, "invalid")
    bad = editor.post(entries, {"entries": [{"payload": 1}, {"payload": 1, "x": 1}]},
                      format="json")  # fmt: skip
    assert assert_error(bad, 400, "invalid")["details"]["index"] == 1
    over = {"entries": [{"payload": i} for i in range(streams.APPEND_MAX + 1)]}
    assert_error(editor.post(entries, over, format="json"), 400, "invalid")
    streams.topic_update(topic=topic, max_payload_bytes=8)
    big = editor.post(entries, {"payload": "x" * 100}, format="json")
    assert_error(big, 413, "payload_too_large")


def test_read__since_limit_and_out_of_range_409_with_the_first_offset(topic, tree, editor):
    fill(topic, 10)
    page = editor.get(url(tree["child"], "entries/") + "?since=2&limit=3").json()
    assert [e["offset"] for e in page["entries"]] == [3, 4, 5]
    assert (page["next_since"], page["head_offset"], page["first_offset"]) == (5, 10, 1)
    assert page["entries"][0]["payload"] == {"n": 2}
    streams.topic_update(topic=topic, max_entries=3)
    streams.topic_prune(topic=topic)
    gone = editor.get(url(tree["child"], "entries/") + "?since=2")
    error = assert_error(gone, 409, "offset_out_of_range")
    assert error["details"]["first_available_offset"] == 8
    for query in ("since=-1", "since=x", "limit=0", "limit=5000", "wait_seconds=21",
                  "colour=red"):  # fmt: skip
        assert_error(editor.get(url(tree["child"], "entries/") + "?" + query), 400, "invalid")
    beyond = editor.get(url(tree["child"], "entries/") + "?since=11")
    assert assert_error(beyond, 409, "offset_out_of_range")["details"]["head_offset"] == 10


def test_commit__forward_only_409_offset_regressed_reset_goes_back(topic, tree, editor, admin):
    fill(topic, 5)
    commit = url(tree["child"], "consumers/c1/commit/")
    response = editor.post(commit, {"offset": 4}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["committed_offset"], response.json()["lag"]) == (4, 1)
    error = assert_error(editor.post(commit, {"offset": 3}, format="json"), 409,
                         "offset_regressed")  # fmt: skip
    assert error["details"] == {"committed_offset": 4, "offset": 3}
    assert_error(editor.post(commit, {"offset": 9}, format="json"), 409, "offset_out_of_range")
    assert_error(editor.post(commit, {"offset": "4"}, format="json"), 400, "invalid")
    reset = url(tree["child"], "consumers/c1/reset/")
    assert_error(editor.post(reset, {"offset": 1}, format="json"), 403, "permission_denied")
    back = admin.post(reset, {"offset": 1}, format="json")
    assert back.status_code == 200 and back.json()["committed_offset"] == 1
    latest = admin.post(reset, {"to": "latest"}, format="json").json()
    assert latest["committed_offset"] == 5
    assert_error(admin.post(reset, {}, format="json"), 400, "invalid")
    assert_error(admin.post(reset, {"offset": 1, "to": "latest"}, format="json"), 400, "invalid")


def test_consumer_read__from_the_saved_offset_and_lag_in_the_topic(topic, tree, editor):
    fill(topic, 6)
    streams.consumer_commit(topic=topic, name="c1", offset=4)
    page = editor.get(url(tree["child"], "consumers/c1/entries/")).json()
    assert [e["offset"] for e in page["entries"]] == [5, 6]
    assert page["since"] == 4
    detail = editor.get(url(tree["child"])).json()
    assert [(c["name"], c["committed_offset"], c["lag"]) for c in detail["consumers"]] == [
        ("c1", 4, 2)
    ]
    listed = editor.get(url(tree["child"], "consumers/")).json()
    assert listed["count"] == 1 and listed["results"][0]["lag"] == 2
    assert_error(editor.get(url(tree["child"], "consumers/nobody/")), 404, "consumer_not_found")
    assert_error(editor.get(url(tree["child"], "consumers/c1/entries/") + "?since=1"), 400,
                 "invalid")  # fmt: skip


def test_purge_and_delete__manage_only(topic, tree, editor, admin):
    fill(topic, 3)
    assert_error(editor.post(url(tree["child"], "purge/")), 403, "permission_denied")
    purged = admin.post(url(tree["child"], "purge/"))
    assert (purged.status_code, purged.json()) == (200, {"count": 3})
    assert_error(admin.post(url(tree["child"], "purge/"), {"x": 1}, format="json"), 400, "invalid")
    streams.consumer_commit(topic=topic, name="c1", offset=3)
    assert_error(editor.delete(url(tree["child"], "consumers/c1/")), 403, "permission_denied")
    assert admin.delete(url(tree["child"], "consumers/c1/")).status_code == 204
    assert not StreamConsumer.objects.exists()
    assert_error(editor.delete(url(tree["child"])), 403, "permission_denied")
    assert admin.delete(url(tree["child"])).status_code == 204
    assert_error(admin.get(url(tree["child"])), 404, "topic_not_found")


def test_authz__viewer_reads_only_editor_appends_and_commits(topic, tree):
    fill(topic, 2)
    viewer = user_client(tree["child"], VIEWER)
    assert viewer.get(url(tree["child"], "entries/")).status_code == 200
    denied = viewer.post(url(tree["child"], "entries/"), {"payload": 1}, format="json")
    assert_error(denied, 403, "permission_denied")
    denied = viewer.post(url(tree["child"], "consumers/c/commit/"), {"offset": 1}, format="json")
    assert_error(denied, 403, "permission_denied")
    create = viewer.post(f"/api/groups/{tree['child'].slug}/topics/", {"name": "x"}, format="json")
    assert_error(create, 403, "permission_denied")
    outsider = user_client(tree["sibling"], ADMIN)
    assert_error(outsider.get(url(tree["child"], "entries/")), 404, "not_found")


def test_authz__app_tokens_by_scope_within_the_subtree(topic, tree):
    fill(topic, 1)
    writer = app_client(tree["app_grandchild"], "queue:write")
    assert writer.post(url(tree["child"], "entries/"), {"payload": 1},
                       format="json").status_code == 201  # fmt: skip
    assert_error(writer.get(url(tree["child"], "entries/")), 403, "permission_denied")
    reader = app_client(tree["app_grandchild"], "queue:read")
    assert reader.get(url(tree["child"], "entries/")).status_code == 200
    consumer = app_client(tree["app_grandchild"], "queue:consume")
    ok = consumer.post(url(tree["child"], "consumers/c/commit/"), {"offset": 1}, format="json")
    assert ok.status_code == 200, ok.content
    assert_error(consumer.post(url(tree["child"], "consumers/c/reset/"), {"offset": 0},
                               format="json"), 403, "permission_denied")  # fmt: skip
    stranger = app_client(tree["app_sibling"], "queue:read", "queue:write")
    assert_error(stranger.get(url(tree["child"], "entries/")), 404, "not_found")
