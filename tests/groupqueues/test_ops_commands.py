"""The operations CLI: queue_dead, queue_redrive, queue_pause / queue_resume,
queue_message. Each command: its effect, its filters, its bad arguments (a
CommandError in process; from the shell a non-zero exit, one line on stderr,
no traceback)."""

import json
import subprocess
import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from groupqueues import services
from groupqueues.models import Collection, Message
from tests.conftest import manage_cmd, subprocess_env
from tests.factories import GroupFactory
from tests.groupqueues.conftest import claim, claim_one, enqueue
from tests.groupqueues.dead_helpers import a_mix, dead, states

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(db):
    return services.collection_create(group=GroupFactory(slug="acme"), name="emails")


def run(*args):
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def run_json(*args):
    return json.loads(run(*args, "--json"))


# ------------------------------------------------------------------ queue_dead


def test_queue_dead_list__table_and_json(queue, frozen):
    ids = a_mix(queue)
    out = run("queue_dead", "list", "acme/emails")
    assert "SMTP timeout" in out and "4 dead message(s) of acme/emails" in out
    body = run_json("queue_dead", "list", "acme/emails")
    assert body["queue"] == "acme/emails" and body["filter"] == {"limit": 50}
    assert [m["id"] for m in body["messages"]] == [
        str(ids[k]) for k in ("exhausted", "failed_new", "expired", "failed_old")
    ]
    assert body["messages"][0]["last_error"] == "smtp TIMEOUT again"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--reason", "failed"], {"failed_old", "failed_new"}),
        (["--reason", "expired", "--reason", "exhausted"], {"expired", "exhausted"}),
        (["--since", "1h"], {"failed_new", "expired", "exhausted"}),
        (["--until", "1h"], {"failed_old"}),
        (["--since", "20m", "--until", "5m"], {"expired"}),
        (["--error-contains", "timeout"], {"failed_old", "exhausted"}),
        (["--limit", "1"], {"exhausted"}),
    ],
)
def test_queue_dead_list__filters(queue, frozen, options, expected):
    ids = a_mix(queue)
    body = run_json("queue_dead", "list", "acme/emails", *options)
    assert {m["id"] for m in body["messages"]} == {str(ids[k]) for k in expected}


def test_queue_dead_list__iso_since(queue, frozen):
    ids = a_mix(queue)
    died_at = Message.objects.get(id=ids["expired"]).died_at
    assert died_at is not None
    since = died_at.isoformat()
    body = run_json("queue_dead", "list", "acme/emails", "--since", since)
    assert len(body["messages"]) == 3


def test_queue_dead_redrive__by_filter(queue, frozen):
    ids = a_mix(queue)
    out = run("queue_dead", "redrive", "acme/emails", "--reason", "failed")
    assert out.strip() == "Redrove 2 dead message(s) of acme/emails."
    now = states(queue)
    assert now[ids["failed_old"]] == now[ids["failed_new"]] == "ready"
    assert now[ids["expired"]] == "dead"
    body = run_json("queue_dead", "redrive", "acme/emails", "--all")
    assert body == {"queue": "acme/emails", "count": 2, "filter": {}}
    assert set(states(queue).values()) == {"ready"}


def test_queue_dead_purge__by_filter_keeps_live_messages(queue, frozen):
    ids = a_mix(queue)
    body = run_json(
        "queue_dead", "purge", "acme/emails", "--error-contains", "smtp", "--limit", "1"
    )
    assert body["count"] == 1 and body["filter"] == {"error_contains": "smtp", "limit": 1}
    assert ids["exhausted"] not in states(queue)
    run("queue_dead", "purge", "acme/emails", "--all")
    assert states(queue) == {ids["ready"]: "ready"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("queue_dead", "list", "acme/missing"), "no queue"),
        (("queue_dead", "list", "nobody/emails"), "No group"),
        (("queue_dead", "list", "emails"), "GROUP/NAME"),
        (("queue_dead", "list", "acme/emails", "--reason", "lost"), "invalid choice"),
        (("queue_dead", "list", "acme/emails", "--since", "yesterday"), "since"),
        (("queue_dead", "list", "acme/emails", "--since", "1h", "--until", "2h"), "until"),
        (("queue_dead", "list", "acme/emails", "--limit", "0"), "greater than 0"),
        (("queue_dead", "list", "acme/emails", "--limit", "20000"), "limit"),
        (("queue_dead", "list", "acme/emails", "--error-contains", ""), "error_contains"),
        (("queue_dead", "redrive", "acme/emails"), "--all"),
        (("queue_dead", "purge", "acme/emails"), "--all"),
        (("queue_dead", "bury", "acme/emails"), "invalid choice"),
    ],
)
def test_queue_dead__bad_arguments(queue, args, message):
    dead(queue)
    with pytest.raises(CommandError, match=message):
        run(*args)
    assert list(states(queue).values()) == ["dead"]


# --------------------------------------------------------------- queue_redrive


def test_queue_redrive__ids(queue, frozen):
    ids = a_mix(queue)
    body = run_json("queue_redrive", "acme/emails", "--id", str(ids["expired"]))
    assert body["count"] == 1 and states(queue)[ids["expired"]] == "ready"
    out = run("queue_redrive", "acme/emails", "--id", str(ids["ready"]))
    assert "Redrove 0" in out  # a live message is not dead: nothing to redrive


def test_queue_redrive__same_filters_as_queue_dead(queue, frozen):
    ids = a_mix(queue)
    body = run_json("queue_redrive", "acme/emails", "--since", "15m", "--reason", "expired")
    assert body["count"] == 1 and states(queue)[ids["expired"]] == "ready"
    assert run_json("queue_redrive", "acme/emails", "--all")["count"] == 3


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ((), "--all"),
        (("--id", "not-a-uuid"), "ids"),
        (("--id", str(uuid.uuid4()), "--all"), "not both"),
        (("--id", str(uuid.uuid4()), "--reason", "failed"), "not both"),
        (("--reason", "nope"), "invalid choice"),
        (("--until", "2026-13-01"), "until"),
    ],
)
def test_queue_redrive__bad_arguments(queue, extra, message):
    dead(queue)
    with pytest.raises(CommandError, match=message):
        run("queue_redrive", "acme/emails", *extra)
    assert list(states(queue).values()) == ["dead"]


# ------------------------------------------------------ queue_pause / resume


def test_queue_pause_and_resume(queue):
    second = services.collection_create(group=queue.group, name="sms")
    enqueue(queue)
    assert run("queue_pause", "acme/emails", "acme/sms").splitlines() == [
        "Paused acme/emails.", "Paused acme/sms.",
    ]  # fmt: skip
    assert Collection.objects.get(pk=second.pk).paused
    assert claim(Collection.objects.get(pk=queue.pk)) == []
    body = run_json("queue_resume", "acme/emails")
    assert body == [{"queue": "acme/emails", "paused": False}]
    assert len(claim(Collection.objects.get(pk=queue.pk))) == 1
    assert Collection.objects.get(pk=second.pk).paused


@pytest.mark.parametrize("command", ["queue_pause", "queue_resume"])
def test_queue_pause__bad_reference_changes_nothing(queue, command):
    with pytest.raises(CommandError, match="no queue"):
        run(command, "acme/emails", "acme/missing")
    assert not Collection.objects.get(pk=queue.pk).paused
    with pytest.raises(CommandError, match="queue"):
        run(command)


# --------------------------------------------------------------- queue_message


def test_queue_message_show(queue):
    message_id = enqueue(queue, {"to": "a@example.com"}, priority=3)
    out = run("queue_message", "show", "acme/emails", str(message_id))
    assert "a@example.com" in out and "priority" in out
    body = run_json("queue_message", "show", "acme/emails", str(message_id))
    assert body["id"] == str(message_id) and body["priority"] == 3 and body["state"] == "ready"
    assert "claim_token" not in body


def test_queue_message_retry_now(queue, frozen):
    message_id = enqueue(queue, delay_seconds=600)
    assert claim(queue) == []
    out = run("queue_message", "retry-now", "acme/emails", str(message_id))
    assert "is due now" in out
    assert claim_one(queue).id == message_id


def test_queue_message_priority(queue):
    first, second = enqueue(queue), enqueue(queue)
    body = run_json("queue_message", "priority", "acme/emails", str(second), "--priority", "9")
    assert body["priority"] == 9
    assert [m.id for m in claim(queue, 2)] == [second, first]


def test_queue_message_cancel(queue):
    message_id = enqueue(queue)
    body = run_json("queue_message", "cancel", "acme/emails", str(message_id))
    assert body == {"id": str(message_id), "cancelled": True}
    assert not Message.objects.filter(id=message_id).exists()


@pytest.mark.parametrize(
    ("action", "target", "extra", "message"),
    [
        ("show", "missing", (), "No message"),
        ("show", "not-a-uuid", (), "No message"),
        ("cancel", "dead", (), "is dead"),
        ("retry-now", "claimed", (), "claimed by"),
        ("retry-now", "dead", (), "redrive"),
        ("priority", "ready", (), "--priority"),
        ("priority", "ready", ("--priority", "5000"), "priority"),
        ("priority", "ready", ("--priority", "high"), "invalid int"),
        ("show", "ready", ("--priority", "1"), "--priority"),
        ("poke", "ready", (), "invalid choice"),
    ],
)
def test_queue_message__bad_arguments(queue, action, target, extra, message):
    ids = {"ready": enqueue(queue), "dead": dead(queue), "missing": uuid.uuid4()}
    enqueue(queue)
    ids["claimed"] = claim_one(queue).id
    before = states(queue)
    ref = str(ids.get(target, target))
    with pytest.raises(CommandError, match=message):
        run("queue_message", action, "acme/emails", ref, *extra)
    assert states(queue) == before


# -------------------------------------------------------- from a real shell


@pytest.mark.parametrize(
    "args",
    [
        ("queue_dead", "list", "acme/emails", "--reason", "lost"),
        ("queue_dead", "list", "nobody/emails"),
        ("queue_dead", "redrive", "acme/emails", "--since", "soon", "--json"),
    ],
)
def test_commands__errors_are_one_line_and_non_zero_from_the_shell(args):
    result = subprocess.run(
        manage_cmd(*args), env=subprocess_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stdout == ""


@pytest.mark.django_db(transaction=True)
def test_queue_dead__json_from_the_shell():
    queue = services.collection_create(group=GroupFactory(slug="acme"), name="emails")
    ids = a_mix(queue)
    cmd = manage_cmd("queue_dead", "list", "acme/emails", "--reason", "failed", "--json")
    result = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    listed = {m["id"] for m in json.loads(result.stdout)["messages"]}
    assert listed == {str(ids["failed_old"]), str(ids["failed_new"])}
