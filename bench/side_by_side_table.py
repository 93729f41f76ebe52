"""The side-by-side run's table and issue 13's target ratios (not a test).

    .venv/bin/python bench/side_by_side_table.py /tmp/peers/peers/results TAG [BASE_TAG]

Reads what ``side_by_side.sh ... TAG`` (/work/shared/peers) left in the
harness's results directory (``pgbench-ceiling-TAG.json``, ``project-TAG.json``,
``project-n100k-TAG.json``, ``pgqueuer-TAG.json``, ``pgqueuer-n100k-TAG.json``,
``project-sqlite-TAG.json`` if ``bench/sqlite_peer.py`` ran) and prints the
markdown table of bench/README.md with each target's ratio. ``BASE_TAG``: the
project's figures of another run (``run_project.py --tag BASE_TAG``, e.g. the
code before a change) in a column of their own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def load(results: Path, name: str) -> dict[str, Any]:
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def med(result: dict[str, Any], phase: str, key: str = "msg_per_s") -> float | None:
    try:
        return float(result["phases"][phase][key]["median"])
    except KeyError:
        return None


def ceiling(result: dict[str, Any], scenario: str) -> float | None:
    try:
        return float(result["scenarios"][scenario]["msg_per_s"]["median"])
    except KeyError:
        return None


def fmt(value: float | None, unit: str = "/s") -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}{unit}" if unit == "/s" else f"{value:.1f}{unit}"


def ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or b is None or not b else f"{a / b:.2f}"


def main() -> None:
    results, tag = Path(sys.argv[1]), sys.argv[2]
    base_tag = sys.argv[3] if len(sys.argv) > 3 else None
    ours, ours100 = load(results, f"project-{tag}"), load(results, f"project-n100k-{tag}")
    pgq, pgq100 = load(results, f"pgqueuer-{tag}"), load(results, f"pgqueuer-n100k-{tag}")
    ceil = load(results, f"pgbench-ceiling-{tag}")
    lite = load(results, f"project-sqlite-{tag}")
    base = load(results, f"project-{base_tag}") if base_tag else {}
    base100 = load(results, f"project-n100k-{base_tag}") if base_tag else {}
    rows = [
        ("enqueue one by one", med(ours, "enqueue"), med(base, "enqueue"), med(pgq, "enqueue"),
         ceiling(ceil, "insert1@c1"), "insert1@c1", med(lite, "enqueue")),
        ("enqueue in bulk", med(ours, "bulk"), med(base, "bulk"), med(pgq, "bulk"),
         ceiling(ceil, "insert100@c1"), "insert100@c1", med(lite, "bulk")),
        ("drain, 1 worker, 10k", med(ours, "drain1"), med(base, "drain1"), med(pgq, "drain1"),
         ceiling(ceil, "claim100_ack_delete@c1"), "claim100+DELETE@c1", med(lite, "drain1")),
        ("drain, 2 workers, 10k", med(ours, "drain2"), med(base, "drain2"), med(pgq, "drain2"),
         ceiling(ceil, "claim100_ack_delete@c2"), "claim100+DELETE@c2", med(lite, "drain2")),
        ("drain, 1 worker, 100k", med(ours100, "drain1"), med(base100, "drain1"),
         med(pgq100, "drain1"), ceiling(ceil, "claim100_ack_delete@c1"), "claim100+DELETE@c1",
         None),
        ("drain, 2 workers, 100k", med(ours100, "drain2"), med(base100, "drain2"),
         med(pgq100, "drain2"), ceiling(ceil, "claim100_ack_delete@c2"), "claim100+DELETE@c2",
         None),
    ]  # fmt: skip
    print(f"side-by-side run `{tag}` ({ours.get('date', '?')})\n")
    head = "| line | this project | " + ("before | " if base_tag else "")
    print(head + "PgQueuer 1.6 | ceiling (pgbench) | ours / ceiling | ours / PgQueuer | SQLite |")
    print("|---" * (8 if base_tag else 7) + "|")
    for label, a, b, p, c, cname, s in rows:
        before = f"{fmt(b)} | " if base_tag else ""
        print(f"| {label} | {fmt(a)} | {before}{fmt(p)} | {fmt(c)} {cname} | {ratio(a, c)} | "
              f"{ratio(a, p)} | {fmt(s)} |")  # fmt: skip
    for name, result in (("this project", ours), ("before", base), ("PgQueuer", pgq),
                         ("SQLite", lite)):  # fmt: skip
        p50, p99 = med(result, "latency", "p50_ms"), med(result, "latency", "p99_ms")
        if p50 is not None:
            print(f"| wake-up latency p50 / p99, {name} | {fmt(p50, ' ms')} / {fmt(p99, ' ms')} |")
    print("\ntargets:")
    d1, d2 = med(ours100, "drain1"), med(ours100, "drain2")
    targets = [
        ("1 worker >= 5x PgQueuer's 1 worker (10k)", med(ours, "drain1"), med(pgq, "drain1"), 5),
        ("1 worker >= 5x PgQueuer's 1 worker (100k)", d1, med(pgq100, "drain1"), 5),
        ("1 worker >= 60% of claim100+DELETE (100k)", d1,
         ceiling(ceil, "claim100_ack_delete@c1"), 0.6),
        ("2 workers >= 1.6x 1 worker (100k)", d2, d1, 1.6),
        ("enqueue one by one >= 80% of insert1", med(ours, "enqueue"),
         ceiling(ceil, "insert1@c1"), 0.8),
        ("bulk >= 60% of insert100", med(ours, "bulk"), ceiling(ceil, "insert100@c1"), 0.6),
        ("wake-up p99 <= PgQueuer's p50 (ratio <= 1)", med(ours, "latency", "p99_ms"),
         med(pgq, "latency", "p50_ms"), None),
    ]  # fmt: skip
    for label, a, b, want in targets:
        r = None if a is None or b is None or not b else a / b
        met = "?" if r is None else ("met" if (r <= 1 if want is None else r >= want) else "MISSED")
        print(f"- {label}: {'—' if r is None else f'{r:.2f}'} {met}")


if __name__ == "__main__":
    main()
