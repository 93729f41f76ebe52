"""When boundaries fall: cron in a zone (DST gaps and overlaps, month ends),
6-field cron, aliases, ``@every``; what is refused (SPEC §6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from store.exceptions import InvalidSchedule
from store.schedule_expressions import expression_parse

BERLIN = ZoneInfo("Europe/Berlin")


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def local(expr, start, n, tz="Europe/Berlin"):
    zone = ZoneInfo(tz)
    return [b.astimezone(zone) for b in expression_parse(text=expr, timezone=tz).upcoming(start, n)]


def test_cron__spring_gap_time_is_no_boundary_and_the_days_around_keep_their_time():
    # Europe/Berlin 2026-03-29: 02:00 -> 03:00, so 02:30 does not exist that day.
    got = local("30 2 * * *", utc(2026, 3, 27), 3)
    assert [(b.day, b.hour, b.minute) for b in got] == [(27, 2, 30), (28, 2, 30), (30, 2, 30)]


def test_cron__autumn_overlap_time_fires_once_at_its_first_occurrence():
    # 2026-10-25: 03:00 CEST -> 02:00 CET, so 02:30 happens twice.
    got = expression_parse(text="30 2 * * *", timezone="Europe/Berlin").upcoming(
        utc(2026, 10, 24, 12), 2
    )
    assert got == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


def test_cron__overlap_hour_boundaries_are_not_doubled():
    got = expression_parse(text="*/30 * * * *", timezone="Europe/Berlin").upcoming(
        utc(2026, 10, 24, 23, 59), 4
    )
    walls = [b.astimezone(BERLIN).strftime("%H:%M") for b in got]
    assert walls == ["02:00", "02:30", "03:00", "03:30"]
    assert len(set(walls)) == len(walls)


def test_cron__hourly_across_the_gap_skips_only_the_missing_hour():
    got = local("0 * * * *", utc(2026, 3, 28, 23, 30), 3)  # 00:30 CET
    assert [b.hour for b in got] == [1, 3, 4]


def test_cron__month_end_fires_only_in_months_with_a_31st():
    got = expression_parse(text="0 0 31 * *").upcoming(utc(2026, 1, 1), 4)
    assert [b.month for b in got] == [1, 3, 5, 7]


def test_cron__six_fields_have_a_leading_seconds_field():
    got = expression_parse(text="*/20 * * * * *").upcoming(utc(2026, 1, 1), 3)
    assert got == [utc(2026, 1, 1, 0, 0, 20), utc(2026, 1, 1, 0, 0, 40), utc(2026, 1, 1, 0, 1)]


@pytest.mark.parametrize(
    ("alias", "after"),
    [("@hourly", utc(2026, 1, 1, 1)), ("@daily", utc(2026, 1, 2)), ("@weekly", utc(2026, 1, 4)),
     ("@monthly", utc(2026, 2, 1)), ("@yearly", utc(2027, 1, 1))],
)  # fmt: skip
def test_cron__aliases(alias, after):
    assert expression_parse(text=alias).next_after(utc(2026, 1, 1, 0, 0, 1)) == after


def test_cron__alias_in_a_zone_is_local_midnight():
    got = expression_parse(text="@daily", timezone="America/New_York").next_after(utc(2026, 1, 1))
    assert got == utc(2026, 1, 1, 5)


def test_every__aligned_on_the_epoch_and_walks_both_ways():
    expr = expression_parse(text="@every 1h30m")
    assert expr.next_after(utc(2026, 1, 1, 0, 10)) == utc(2026, 1, 1, 1, 30)
    assert expr.prev_at_or_before(utc(2026, 1, 1, 1, 30)) == utc(2026, 1, 1, 1, 30)
    assert expr.upcoming(utc(2026, 1, 1), 2)[1] - expr.upcoming(utc(2026, 1, 1), 1)[0] == (
        timedelta(minutes=90)
    )


def test_every__is_elapsed_time_whatever_the_zone():
    expr = expression_parse(text="@every 30m", timezone="Europe/Berlin")
    got = expr.upcoming(utc(2026, 3, 29, 0, 0), 3)
    assert [b - got[0] for b in got] == [timedelta(0), timedelta(minutes=30), timedelta(hours=1)]


@pytest.mark.parametrize(
    "text",
    ["", "61 * * * *", "1 2 3", "* * * * * * *", "a b c d e", "@often", "@every", "@every 0s",
     "@every 5x", "@every 400d", "0 0 30 2 *"],
)  # fmt: skip
def test_parse__refuses_bad_expressions_with_the_field(text):
    with pytest.raises(InvalidSchedule) as caught:
        expression_parse(text=text)
    assert list(caught.value.details) == ["schedule"]


def test_parse__refuses_unknown_zones():
    with pytest.raises(InvalidSchedule) as caught:
        expression_parse(text="@daily", timezone="Mars/Olympus")
    assert list(caught.value.details) == ["timezone"]
