#!/usr/bin/env python
"""The batches' order of a fit (``learner.shuffle``): GAL's test accuracy (MAD for regression) under both orders,
side by side, seeds 0–3: ``rows``, the papers' (each epoch a fresh permutation of the rows), and ``blocks`` (each
organization's rows permuted once per fit, then each epoch their contiguous batches in a fresh order).

    python benchmarks/batch_order.py --out batch_order.json   # ~10 min on 2 cores
    python benchmarks/batch_order.py --quick                  # wine and digits, ~1 min
    python benchmarks/batch_order.py --only-scale --scale 100000 1000000 --out batch_order_scale.json  # ~15 min

The UCI tables of GAL's appendix (linear organizations, M = 2 and 4, as its Tables 10 and 11) at the paper's batch
of 1,024 rows, which holds each table's training rows whole (one batch an epoch, nothing drawn: both orders are one
fit, a check), and at batches of 32 rows, where the orders differ; and scikit-learn's digits (M = 8, the paper's
batch: two batches an epoch). With ``--scale N ...``, also ``benchmarks/scale.py``'s numeric and realistic tables at
N rows per organization (8 linear organizations, the paper's batch, one round as ``scale.py`` runs it, no audit;
``--only-scale``: those alone). Each setting's mean (std) over seeds of the final and the best-over-rounds figure under
each order, their difference, and whether it is within the seeds' spread (the larger of the two standard
deviations). The large tables' rounds under both orders, with their accuracy, are ``benchmarks/scale.py
--shuffles rows blocks``'s.
"""

from __future__ import annotations

import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

from common import parse_args, run_all, write_records

from vcl.config import RunConfig
from vcl.coordinator.sweep import Job

UCI = ["diabetes", "boston", "blob", "iris", "wine", "breast_cancer"]
ORDERS = ("rows", "blocks")


def settings(quick: bool):
    """(dataset, M, batch size; 0: the paper's) to run under each order."""
    if quick:
        yield from (("wine", 4, 32), ("digits", 8, 0))
        return
    for m in (2, 4):
        for ds in UCI:
            for batch in (0, 32):
                yield ds, m, batch
    yield "digits", 8, 0


def report(records: list[dict]) -> str:
    """Per setting: each order's mean (std) of the final and the best figure, the difference and the spread."""
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        groups[(r["dataset"], r["organizations"], r["batch_size"])][r["shuffle"]].append(r)
    lines = [
        "| dataset | M | batch | metric | rows: final | blocks: final | difference (spread) | rows: best "
        "| blocks: best | difference (spread) | within the seeds' spread |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (ds, m, batch), by in groups.items():
        if set(by) != set(ORDERS):
            continue
        metric = by["rows"][0]["metric"]
        scale = 100.0 if metric == "accuracy" else 1.0
        cells, within = [], True
        for key in ("value", "best_value"):
            means, spreads = {}, []
            for order in ORDERS:
                values = [r[key] * scale for r in by[order]]
                means[order] = statistics.mean(values)
                spreads.append(statistics.stdev(values) if len(values) > 1 else 0.0)
                cells.append(f"{means[order]:.2f} ({spreads[-1]:.2f})")
            diff, spread = means["blocks"] - means["rows"], max(spreads)
            within = within and abs(diff) <= spread
            cells.append(f"{diff:+.2f} ({spread:.2f})")
        label = "paper's" if batch == 0 else str(batch)
        lines.append(f"| {ds} | {m} | {label} | {metric} | " + " | ".join(cells) + f" | {'yes' if within else 'NO'} |")
    return "\n".join(lines)


def options(p) -> None:
    p.add_argument("--scale", type=int, nargs="+", default=[], help="also scale.py's tables at these rows each")
    p.add_argument("--only-scale", action="store_true", help="only scale.py's tables (with --scale)")


def scale_jobs(sizes: list[int], seeds: list[int], folder: Path) -> list[Job]:
    """Both orders on ``scale.py``'s numeric and realistic files of each size (written into ``folder``)."""
    from scale import SHAPES

    jobs = []
    for rows in sizes:
        for shape, (generate, flags, _) in SHAPES.items():
            (folder / f"{shape}-{rows}").mkdir()
            files = [str(p) for p in generate(folder / f"{shape}-{rows}", rows, "csv")]
            shaped = dict(zip(flags[::2], flags[1::2], strict=True))  # e.g. --data.categorical onehot
            for order in ORDERS:
                for seed in seeds:
                    cfg = RunConfig.from_dict(
                        {
                            "data.dataset": "csv",
                            "data.task": "classification",
                            "data.csv_files": files,
                            **{k.removeprefix("--"): v for k, v in shaped.items()},
                            "learner.model": ["linear"],
                            "learner.shuffle": order,
                            "run.seed": seed,
                            "run.rounds": 1,
                            "run.audit": False,
                            "run.keep_messages": False,
                            "compare": [],
                            "run.device": "cpu",
                        }
                    )
                    extra = {"shuffle": order, "batch_size": 0, "dataset": f"scale {shape} {rows:,}",
                             "organizations": len(files)}  # fmt: skip
                    jobs.append(Job("batch_order", cfg, "gal", "linear", extra=extra))
    return jobs


def main() -> None:
    args = parse_args(__doc__, options)
    with tempfile.TemporaryDirectory(prefix="vcl-batch-order-") as folder:
        jobs = scale_jobs(args.scale, args.seeds, Path(folder))
        if not args.only_scale:
            jobs += uci_jobs(args)
        records = run_all(jobs, args)
    write_records(records, args.out)
    print(report(records))


def uci_jobs(args) -> list[Job]:
    jobs = []
    for ds, m, batch in settings(args.quick):
        if ds == "iris" and m > 4:
            continue
        for order in ORDERS:
            for seed in args.seeds:
                cfg = RunConfig.from_dict(
                    {
                        "data.dataset": ds,
                        "data.organizations": m,
                        "learner.model": ["linear"],
                        "learner.batch_size": batch,
                        "learner.shuffle": order,
                        "run.seed": seed,
                        "compare": [],
                        "run.device": "cpu",
                    }
                )
                jobs.append(Job("batch_order", cfg, "gal", "linear", extra={"shuffle": order, "batch_size": batch}))
    return jobs


if __name__ == "__main__":
    main()
