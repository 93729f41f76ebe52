"""The plain path (no keys, no fairness, no limits) of two or more checkouts,
interleaved round by round (not a test; see bench/README.md, issue 18).

    git worktree add --detach /tmp/before 148436a      # main before the keys merge
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/bench .venv/bin/python \\
        bench/plain_before_after.py before=/tmp/before head=. --rounds 5

Each round runs every checkout once, in a subprocess that imports that
checkout's ``bench/engine_bench.py`` and code (so each measures its own claim,
ack and enqueue) against its own database (``<DATABASE_URL>_<name>``, created
beforehand, migrated by the checkout); the order of the checkouts alternates
from round to round, so neither always runs first. Scenarios, one process,
each in a fresh collection after ``engine_bench.settle()``: enqueue in batches
of 500, claim+ack at batch 1 and 100, ack+claim next at batch 1 and 100.
Prints each checkout's median rate and median CPU per message (client +
server: ``cpu_cost``, steadier than the rate on a busy machine) per scenario,
each as a ratio to the first checkout's.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# (label, messages, the batch size of a drain (0: the enqueue is measured),
# whether each ack carries the next claim)
SCENARIOS = (
    ("enqueue batches of 500", 20_000, 0, False),
    ("claim+ack batch 1", 2_000, 1, False),
    ("claim+ack batch 100", 20_000, 100, False),
    ("ack+claim next, batch 1", 2_000, 1, True),
    ("ack+claim next, batch 100", 20_000, 100, True),
)


def child(root: Path, database_url: str) -> None:
    """One round in checkout ``root``: every scenario once, through that
    checkout's ``engine_bench`` helpers (``fill``, ``drain``,
    ``drain_combined``); JSON {label: [msg/s, CPU µs per message]} on stdout."""
    sys.path[:0] = [str(root), str(root / "bench")]
    import engine_bench as eb  # that checkout's
    from cpu_cost import measured  # this one's (the older checkouts have none)

    eb.setup_django(database_url)
    eb.migrate()
    out: dict[str, list[float]] = {}
    for label, count, batch, combined in SCENARIOS:
        queue = eb.new_queue("plain")
        if not batch:
            eb.settle()
            done, cost = count, measured(functools.partial(eb.fill, queue, count))[1]
        else:
            eb.fill(queue, count)
            eb.settle()
            step = eb.drain_combined if combined else eb.drain
            done, cost = measured(functools.partial(step, queue.pk, batch))
        out[label] = [done / cost.wall, cost.cpu / done * 1e6]
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", help="name=path, the first is the baseline")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--child", nargs=2, metavar=("ROOT", "DATABASE_URL"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1])
        return
    base_url = os.environ["DATABASE_URL"]
    checkouts = [tuple(c.split("=", 1)) for c in args.checkouts]
    runs: dict[str, list[dict[str, list[float]]]] = {name: [] for name, _ in checkouts}
    print(f"load average at the start {os.getloadavg()[0]:.2f}", flush=True)
    for r in range(args.rounds):
        order = checkouts if r % 2 == 0 else checkouts[::-1]
        for name, path in order:
            env = {**os.environ, "DATABASE_URL": f"{base_url}_{name}"}
            root = str(Path(path).resolve())
            out = subprocess.run(
                [sys.executable, __file__, "--child", root, env["DATABASE_URL"]],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1} {name}: {runs[name][-1]}", flush=True)
    baseline = checkouts[0][0]
    print(f"\nmedian of {args.rounds} rounds, ratio to {baseline} (CPU: {baseline}'s / this)")
    for label, *_ in SCENARIOS:
        base_rate = statistics.median(run[label][0] for run in runs[baseline])
        base_cpu = statistics.median(run[label][1] for run in runs[baseline])
        cells = []
        for name, _ in checkouts:
            rate = statistics.median(run[label][0] for run in runs[name])
            cpu = statistics.median(run[label][1] for run in runs[name])
            cells.append(
                f"{name} {rate:>8,.0f}/s ({rate / base_rate:>4.0%}) "
                f"{cpu:>5.0f} us ({base_cpu / cpu:>4.0%})"
            )
        print(f"{label:<26} " + "  ".join(cells))
    print(f"(load average at the end {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
