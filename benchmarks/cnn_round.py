#!/usr/bin/env python
"""A GAL round of CNN organizations beside Joint's one CNN: what fitting the organizations together costs.

    python benchmarks/cnn_round.py --out runs/bench/cnn_round.json           # Fashion-MNIST (make data), 2 pairs
    python benchmarks/cnn_round.py --quick --out runs/bench/cnn_round.json   # the MNIST subset, 1 pair

GAL's side is one round of ``--organizations`` CNN organizations on the image's patches, each with the widths
``--widths``, fitted together in one vmapped pass (``run.concurrent``, the default) for ``--epochs`` local epochs;
Joint's is one round of one CNN of the summed widths (M × each width) on whole images for the same epochs: the
model the issue sets GAL's round against. Each run is ``train.py`` in a process of its own (one round, nothing
compared, no audit), GAL then Joint in one pair and Joint then GAL in the next, so the machine's drift falls on both.
A record per run: the side, the pair, the round's seconds (``round_seconds``: Alice's part is a small share of it),
the organizations' fit seconds, the process's peak RSS when the round ended (``memory``), and the test accuracy.
The table: medians per side and GAL's over Joint's (the target: at most 1.5×).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import write_records

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the MNIST subset (2,000 training images), 1 pair")
    p.add_argument("--dataset", default=None, help="default fashion_mnist (quick: mnist_subset)")
    p.add_argument("--organizations", type=int, default=8, help="M, GAL's organizations (patches of each image)")
    p.add_argument("--widths", type=int, nargs=4, default=[2, 4, 8, 16], help="each organization's CNN widths")
    p.add_argument("--epochs", type=int, default=1, help="local epochs of the round, both sides")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--pairs", type=int, default=None, help="runs of each side (default 2; quick 1)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    return p.parse_args(argv)


def command(args, side: str, out: Path) -> list[str]:
    widths = args.widths if side == "gal" else [args.organizations * w for w in args.widths]
    values = {
        "method": side,
        "data.dataset": args.dataset,
        "data.organizations": args.organizations,
        "learner.model": "[cnn]",
        "learner.cnn_widths": json.dumps(widths),
        "learner.epochs": args.epochs,
        "learner.batch_size": args.batch_size,
        "run.rounds": 1,
        "run.device": args.device,
        "run.audit": "false",
        "compare": "[]",
    }
    if args.quick:
        values["data.max_train"] = 2000
    cmd = [sys.executable, str(ROOT / "train.py"), "--out", str(out), "--quiet"]
    return cmd + [item for key, value in values.items() for item in (f"--{key}", str(value))]


def run(args, side: str, pair: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / side
        done = subprocess.run(command(args, side, out), capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            sys.exit(f"error: the {side} run failed:\n{done.stderr[-3000:]}")
        results = json.loads((out / "results.json").read_text())
    [round_] = [r for r in results["rounds"] if r["round"] == 1]
    marks = {m["step"]: m for m in results["memory"]}
    return {
        "benchmark": "cnn_round",
        "side": side,
        "pair": pair,
        "dataset": args.dataset,
        "organizations": len(results["organizations"]),
        "widths": args.widths if side == "gal" else [args.organizations * w for w in args.widths],
        "epochs": args.epochs,
        "device": args.device,
        "round_seconds": results["round_seconds"][0],
        "fit_seconds": round_["fit_seconds"],
        "peak_rss": marks["rounds"]["peak"],
        "accuracy": results["final"]["test"],
    }


def report(records: list[dict]) -> str:
    lines = ["| side | organizations | widths | epochs | round s (median) | peak RSS GB (median) | accuracy |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    median = {}
    for side in ("gal", "joint"):
        mine = [r for r in records if r["side"] == side]
        if not mine:
            continue
        median[side] = statistics.median(r["round_seconds"] for r in mine)
        peak = statistics.median(r["peak_rss"] for r in mine) / 1e9
        acc = statistics.fmean(r["accuracy"] for r in mine)
        lines.append(f"| {side} | {mine[0]['organizations']} | {mine[0]['widths']} | {mine[0]['epochs']} | "
                     f"{median[side]:.1f} | {peak:.2f} | {100 * acc:.1f} |")  # fmt: skip
    if len(median) == 2:
        lines.append(f"\nGAL's round over Joint's: {median['gal'] / median['joint']:.2f}× (target: at most 1.5×)")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    args.dataset = args.dataset or ("mnist_subset" if args.quick else "fashion_mnist")
    pairs = args.pairs or (1 if args.quick else 2)
    records = []
    for pair in range(pairs):
        for side in ("gal", "joint") if pair % 2 == 0 else ("joint", "gal"):
            records.append(run(args, side, pair))
            r = records[-1]
            print(f"pair {pair} {side}: {r['round_seconds']:.1f} s, peak {r['peak_rss'] / 1e9:.2f} GB, "
                  f"accuracy {r['accuracy']:.4f}", flush=True)  # fmt: skip
    write_records(records, args.out)
    print(report(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
