"""GAL seconds per round against the number of organizations and of rows, organizations fitted together
(one vmapped pass, ``run.concurrent: true``) or one after another.

    python benchmarks/scaling.py --quick --out runs/bench/scaling_quick.json   # a few minutes on a 2-core CPU
    python benchmarks/scaling.py --out runs/bench/scaling.json                 # M up to 64, rows up to 10⁶
    python benchmarks/scaling.py --device cuda --out runs/bench/scaling_cuda.json

Two sweeps, each run concurrent and sequential, with the default learner (Linear) trained for
``--epochs`` epochs a round:

- organizations: M = 2 … 64 on digits (64 columns: at M = 64 one pixel each) and on a synthetic wide
  table (``ascii_blobs_redundant``: 200 columns, 10 classes, 1,000 training rows);
- rows: 10³ … 10⁶ training rows of the wide table at M = 8.

The organizations sweep's runs of one dataset, seed and fit (concurrent or sequential), every size, are stepped a
round at a time in turn in one process (``vcl.coordinator.sweep.Interleaved``): a shared machine's speed drifts by tens
of percent within seconds, and a ratio of M = 64 to M = 8 taken from runs made one after another measures that drift as
much as the code. ``--repeats N`` runs that sweep N times. A record carries ``organizations``, ``rows`` (training
rows), ``seconds_per_round`` (the median of a run's rounds; median over seeds and repeats in the tables),
``round_seconds`` (every round's), ``repeat``, ``interleaved``, ``transport``, ``device`` and ``concurrent``; a
config's value must be the same in every run, concurrent or sequential, whatever the repeat (the tables say
whether it is). Saves a PNG of both curves next to ``--out``.
The target of a scalable round: M = 64 at most 2× the time per round of M = 8 on the same data; the growth
table also gives that ratio for each run's mean round (its first round, which pays one-time costs, included) and
its range over the pairs of runs stepped side by side (one per seed and repeat).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from common import add_cluster_args, run_all, write_records

from vcl.config import RunConfig
from vcl.coordinator.sweep import Interleaved, Job

WIDE = "ascii_blobs_redundant"  # the synthetic wide table: 200 columns (5 informative), 10 classes
DIGITS_TRAIN = int(1797 * (1 - 0.2))  # digits' training rows: its 1,797 rows less the default test fraction


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="M in 2 8 64, rows up to 10⁵, one seed")
    p.add_argument("--out", default=None, help="write the records to this JSON file (and the PNG beside it)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="run seeds (quick: 0; full: 0 1 2)")
    p.add_argument("--repeats", type=int, default=1, help="runs of the organizations sweep (see above)")
    p.add_argument("--rounds", type=int, default=5, help="GAL rounds per run")
    p.add_argument("--epochs", type=int, default=10, help="local epochs per round")
    p.add_argument("--device", default="cpu", help="cpu, cuda, auto")
    return add_cluster_args(p).parse_args()  # seconds are comparable only between runs made with --workers 1


def sweeps(quick: bool):
    """(sweep, dataset, organizations, training rows of the wide table) to run."""
    for m in [2, 8, 64] if quick else [2, 4, 8, 16, 32, 64]:
        for ds in ("digits", WIDE):
            yield "organizations", ds, m, 1000
    for n in [1000, 10_000, 100_000] if quick else [1000, 10_000, 100_000, 1_000_000]:
        yield "rows", WIDE, 8, n


def config(ds: str, m: int, rows: int, seed: int, concurrent: bool, args) -> RunConfig:
    return RunConfig.from_dict(
        {
            "data.dataset": ds,
            "data.organizations": m,
            "data.synthetic_train": rows,
            "data.synthetic_test": 1000,
            "learner.epochs": args.epochs,
            "learner.milestones": [max(1, args.epochs // 2)],
            "run.rounds": args.rounds,
            "run.seed": seed,
            "run.concurrent": concurrent,
            "run.device": args.device,
            "run.keep_messages": False,  # speed, not privacy: nothing kept, no audit (vcl.audit)
            "compare": [],
            "out": "",
        }
    )


def table(records: list[dict], sweep: str) -> str:
    groups = defaultdict(list)
    for r in records:
        if r["sweep"] == sweep:
            groups[(r["dataset"], r["organizations"], r["rows"], r["concurrent"])].append(r)
    lines = [
        "| dataset | M | rows | concurrent s/round | sequential s/round | speed-up | same result |",
        "|---|---|---|---|---|---|---|",
    ]
    for ds, m, n in sorted({k[:3] for k in groups}):
        con, seq = groups.get((ds, m, n, True)), groups.get((ds, m, n, False))
        if not (con and seq):
            continue
        c = statistics.median(r["seconds_per_round"] for r in con)
        s = statistics.median(r["seconds_per_round"] for r in seq)
        seeds = {r.get("seed", 0) for r in con + seq}
        same = all(len({r["value"] for r in con + seq if r.get("seed", 0) == x}) == 1 for x in seeds)
        lines.append(f"| {ds} | {m} | {n:,} | {c:.3f} | {s:.3f} | {s / c:.2f}× | {'yes' if same else 'no'} |")
    return "\n".join(lines)


def _mean_round(record: dict) -> float:
    """The mean of a run's rounds. Records written before records kept each round's seconds (``round_seconds``)
    carry that mean as their ``seconds_per_round`` (the report's heading says which it shows)."""
    rounds = record.get("round_seconds")
    return statistics.fmean(rounds) if rounds else record["seconds_per_round"]


def _pairs(a: list[dict], b: list[dict]) -> list[float]:
    """``b``'s seconds per round over ``a``'s for each pair of runs stepped side by side (one seed and repeat);
    none when the records were not stepped in turn."""
    if not all(r.get("interleaved") for r in a + b):
        return []
    by = {(r.get("seed", 0), r.get("repeat", 0)): r["seconds_per_round"] for r in a}
    return [r["seconds_per_round"] / by[k] for r in b if (k := (r.get("seed", 0), r.get("repeat", 0))) in by]


def growth(records: list[dict]) -> str:
    """Per dataset and fit: seconds per round at M = 64 over M = 8 (the target: at most 2×), each run's median
    round, median over seeds and repeats; beside it the same ratio of each run's mean round, its first round
    included, and the range of the ratios of the pairs of runs stepped side by side."""
    runs = defaultdict(list)
    for r in records:
        if r["sweep"] == "organizations":
            runs[(r["dataset"], r["concurrent"], r["organizations"])].append(r)
    head = "| dataset | fit | s/round M = 8 | s/round M = 64 | M = 64 / M = 8 | target ≤ 2× | mean rounds: 64 / 8 |"
    lines = [head + " pairs side by side |", "|" + "---|" * 8]
    for ds, concurrent in sorted({k[:2] for k in runs}):
        a, b = runs.get((ds, concurrent, 8)), runs.get((ds, concurrent, 64))
        if a and b:
            s8, s64 = (statistics.median(r["seconds_per_round"] for r in rs) for rs in (a, b))
            mean8, mean64 = (statistics.median(_mean_round(r) for r in rs) for rs in (a, b))
            fit = "concurrent" if concurrent else "sequential"
            pairs = _pairs(a, b)
            spread = f"{min(pairs):.2f}-{max(pairs):.2f}× ({len(pairs)})" if pairs else "—"
            lines.append(
                f"| {ds} | {fit} | {s8:.3f} | {s64:.3f} | {s64 / s8:.2f}× | {'met' if s64 <= 2 * s8 else 'not met'} | "
                f"{mean64 / mean8:.2f}× | {spread} |"
            )
    return "\n".join(lines)


def report(records: list[dict]) -> str:
    """The tables this benchmark prints, from its records."""
    device = sorted({r["device"] for r in records})
    per_round = "each run's median round" if all("round_seconds" in r for r in records) else "each run's mean round"
    over = "seeds and repeats" if any(r.get("repeat", 0) for r in records) else "seeds"
    if any(r.get("interleaved") for r in records):
        over += "; a dataset's sizes stepped a round at a time in turn in one process"
    return "\n".join(
        [
            f"Seconds per GAL round against organizations ({per_round}, median over {over}; device "
            f"{', '.join(device)}, transport {', '.join(sorted({r['transport'] for r in records}))}):",
            table(records, "organizations"),
            "\nGrowth from M = 8 to M = 64:",
            growth(records),
            "\nSeconds per GAL round against training rows (M = 8):",
            table(records, "rows"),
        ]
    )


def plot(records: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, sweep, x in ((axes[0], "organizations", "organizations"), (axes[1], "rows", "rows")):
        curves = defaultdict(lambda: defaultdict(list))
        for r in records:
            if r["sweep"] == sweep:
                curves[(r["dataset"], r["concurrent"])][r[x]].append(r["seconds_per_round"])
        for (ds, concurrent), points in sorted(curves.items()):
            xs = sorted(points)
            ax.plot(
                xs,
                [statistics.median(points[v]) for v in xs],
                "-o" if concurrent else "--s",
                label=f"{ds}, {'concurrent' if concurrent else 'sequential'}",
            )
        ax.set_xscale("log", base=2 if sweep == "organizations" else 10)
        ax.set_yscale("log")
        ax.set_xlabel("organizations M" if sweep == "organizations" else "training rows (M = 8)")
        ax.set_ylabel("seconds per GAL round")
        if curves:
            ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"saved {path}")


def main() -> None:
    args = parse_args()
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    if args.repeats < 1:
        print(f"error: --repeats {args.repeats}: give at least 1.", file=sys.stderr)
        sys.exit(2)
    jobs, stepped_together = [], defaultdict(list)  # (repeat, dataset, seed, fit): organizations sweep's runs
    for sweep, ds, m, n in sweeps(args.quick):
        for repeat in range(args.repeats if sweep == "organizations" else 1):
            for seed in seeds:
                for concurrent in (True, False):
                    cfg = config(ds, m, n, seed, concurrent, args)
                    extra = {"sweep": sweep, "rows": n if ds == WIDE else DIGITS_TRAIN, "concurrent": concurrent}
                    extra |= {"repeat": repeat, "interleaved": sweep == "organizations", "transport": "local"}
                    job = Job("scaling", cfg, "gal", "linear", None, extra | {"device": args.device})
                    if sweep == "organizations":
                        stepped_together[(repeat, ds, seed, concurrent)].append(job)
                    else:
                        jobs.append(job)
    jobs = [Interleaved(runs) for runs in stepped_together.values()] + jobs
    records = [r for result in run_all(jobs, args) for r in (result if isinstance(result, list) else [result])]
    write_records(records, args.out)
    print(report(records))
    if args.out:
        plot(records, Path(args.out).with_suffix(".png"))


if __name__ == "__main__":
    main()
