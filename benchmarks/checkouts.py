#!/usr/bin/env python
"""One GAL run on two checkouts of vcl, taking turns: what a change costs per round, side by side.

    python benchmarks/checkouts.py OLD NEW --out runs/bench/checkouts.json            # 10^5 rows, 4 pairs
    python benchmarks/checkouts.py OLD NEW --quick --out runs/bench/checkouts.json    # 10^4 rows, 2 pairs
    python benchmarks/checkouts.py OLD NEW --rows 1000000 --pairs 2 --shuffle blocks  # learner.shuffle: blocks

OLD and NEW are checkouts of vcl (``git worktree add /tmp/old <commit>``), each with the links ``vcl/models ->
../models``, ``vcl/datamodules -> ../datamodules`` and ``vcl/callbacks -> ../callbacks`` (what the editable install
maps), so that a process given ``PYTHONPATH=<checkout>`` imports that checkout's vcl with this environment's
packages. The files are ``benchmarks/scale.py``'s (8 organizations, ``--rows`` rows each, a text ID, 8 numeric
features, 4 classes), generated once into a temporary folder; each run is ``train.py`` on them with Linear
organizations, two rounds and Alone beside GAL, in a process of its own; pair i runs OLD then NEW, or NEW then OLD,
in turn, so that the machine's drift falls on both. A record per run: the checkout, its commit, the pair, the
whole run's seconds, each round's seconds of GAL and of Alone, and the accuracy. The table gives the medians per
checkout and NEW's over OLD's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import write_records


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkouts", nargs=2, help="the two checkouts, OLD then NEW")
    p.add_argument("--quick", action="store_true", help="10^4 rows, 2 pairs")
    p.add_argument("--rows", type=int, default=None, help="rows per organization (default 10^5; quick 10^4)")
    p.add_argument("--pairs", type=int, default=None, help="runs of each checkout (default 4; quick 2)")
    p.add_argument("--shuffle", default="rows", choices=["rows", "blocks"], help="learner.shuffle of every run")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    return p.parse_args(argv)


def checked(folder: str) -> Path:
    """A checkout this script can run: one sentence and exit 2 where it is not."""
    path = Path(folder).resolve()
    missing = [n for n in ("train.py", "vcl/models", "vcl/datamodules", "vcl/callbacks") if not (path / n).exists()]
    if missing:
        print(
            f"{folder} is not a prepared checkout (no {', '.join(missing)}); make one with `git worktree add` and "
            "link vcl/models, vcl/datamodules and vcl/callbacks to its top-level folders.",
            file=sys.stderr,
        )
        sys.exit(2)
    return path


def run(checkout: Path, files: list[str], out: Path, shuffle: str = "rows") -> dict:
    argv = [sys.executable, "train.py", "--data.dataset", "csv", "--data.task", "classification",
            "--data.csv_files", *files, "--learner.model", "linear", "--run.rounds", "2", "--run.device", "cpu",
            "--out", str(out), "--overwrite", "--quiet"]  # fmt: skip
    argv += ["--learner.shuffle", shuffle] if shuffle != "rows" else []  # earlier checkouts lack the option
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run(argv, cwd=checkout, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    r = json.loads((out / "results.json").read_text())
    gal, alone = r["round_seconds"], r["compare"]["alone"]["round_seconds"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True)
    return {"benchmark": "checkouts", "checkout": str(checkout), "commit": commit.stdout.strip(),
            "wall_seconds": wall, "gal_round_1": gal[0], "gal_round_2": gal[1],
            "alone_round_1": alone[0], "alone_round_2": alone[1], "accuracy": r["value"],
            "shuffle": shuffle}  # fmt: skip


def report(records: list[dict]) -> str:
    """Medians per checkout (in the order first run) and the newer's over the older's."""
    commits = list(dict.fromkeys(r["commit"] for r in records))
    rows = {}
    for c in commits:
        mine = [r for r in records if r["commit"] == c]
        rows[c] = {
            "gal": statistics.median(r[k] for r in mine for k in ("gal_round_1", "gal_round_2")),
            "alone": statistics.median(r[k] for r in mine for k in ("alone_round_1", "alone_round_2")),
            "wall": statistics.median(r["wall_seconds"] for r in mine),
            "runs": len(mine),
            "accuracy": mine[0]["accuracy"],
        }
    lines = [
        "| commit | runs | GAL round s (median) | Alone round s (median) | whole run s (median) | accuracy |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {c} | {v['runs']} | {v['gal']:.2f} | {v['alone']:.2f} | {v['wall']:.1f} | {v['accuracy']:.4f} |"
        for c, v in rows.items()
    ]
    if len(commits) == 2:
        old, new = (rows[c] for c in commits)
        lines += ["", f"{commits[1]} over {commits[0]}: GAL round {new['gal'] / old['gal']:.2f}×, Alone round "
                  f"{new['alone'] / old['alone']:.2f}×, whole run {new['wall'] / old['wall']:.2f}×"]  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> None:
    from scale import generate  # the script's folder is on sys.path when it runs; results.py loads only report

    args = parse_args(argv)
    trees = [checked(c) for c in args.checkouts]
    rows = args.rows or (10**4 if args.quick else 10**5)
    pairs = args.pairs or (2 if args.quick else 4)
    records = []
    with tempfile.TemporaryDirectory(prefix="vcl-checkouts-") as tmp:
        folder = Path(tmp)
        (folder / "files").mkdir()
        files = [str(p) for p in generate(folder / "files", rows)]
        for i in range(pairs):
            for k, tree in enumerate(trees if i % 2 == 0 else trees[::-1]):
                record = run(tree, files, folder / f"run{k}", args.shuffle)
                records.append({**record, "rows": rows, "pair": i + 1})
                print(json.dumps(record), flush=True)
    print(report(records))
    if args.out:
        write_records(records, args.out)


if __name__ == "__main__":
    main()
