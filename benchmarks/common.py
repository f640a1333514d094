"""The contract every benchmark script shares: ``--quick``, ``--out FILE``, records, a markdown table.

A record is one (dataset, method, model, organizations, seed) run: ``value`` is the honest figure
(final round, or the round chosen on validation data), ``best_value`` the best test figure over
rounds 0..T — the way the papers report. Accuracy is a fraction; MAD is in target units.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from vcl.coordinator.rundir import strict_json, versions
from vcl.engine.memory import prepare_process

prepare_process()  # every benchmark's process allocates as the command line's does (vcl.engine.memory)


def add_cluster_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--workers``, ``--ray-address``, ``--cpus-per-run``, ``--gpus-per-run``: every script's runs spread."""
    p.add_argument("--workers", type=int, default=1, help="runs at once, as Ray tasks (1: here, one by one)")
    p.add_argument("--ray-address", default="", help="join this Ray cluster (auto or host:port) and run there")
    p.add_argument("--cpus-per-run", type=float, default=1.0, help="CPUs each run holds (its torch threads)")
    p.add_argument("--gpus-per-run", type=float, default=0.0, help="GPUs each run holds (fractions share one)")
    p.add_argument("--resume", action="store_true",
                   help="take the runs a stopped run of this command finished from <out>.partial.jsonl")  # fmt: skip
    return p


def parse_args(description: str, extra=None) -> argparse.Namespace:
    """The shared options; ``extra(parser)`` adds a script's own."""
    p = argparse.ArgumentParser(description=description)
    if extra is not None:
        extra(p)
    p.add_argument("--quick", action="store_true", help="reduced run of about a minute on a 2-core CPU")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="run seeds")
    return add_cluster_args(p).parse_args()


def run_all(jobs: list, args: argparse.Namespace) -> list[dict]:
    """Every job's record, in the order given: here, or ``--workers`` at once as Ray tasks."""
    from vcl.coordinator.sweep import run_jobs

    if args.workers < 1 or args.cpus_per_run <= 0 or args.gpus_per_run < 0:
        print(
            f"error: --workers {args.workers}, --cpus-per-run {args.cpus_per_run}, --gpus-per-run "
            f"{args.gpus_per_run}: give at least 1 worker, CPUs > 0 and GPUs >= 0 per run.",
            file=sys.stderr,
        )
        sys.exit(2)
    journal = journal_of(args.out) if getattr(args, "out", None) else None
    return run_jobs(jobs, args.workers, args.ray_address, args.cpus_per_run, args.gpus_per_run, journal,
                    getattr(args, "resume", False))  # fmt: skip


def check_fashion(root: str = "data") -> None:
    """Fashion-MNIST's files, or one sentence naming the command that lays them out (exit 2) before any run."""
    from vcl.datamodules.image import load_images

    from vcl.errors import VCLInputError

    try:
        load_images("fashion_mnist", root)
    except VCLInputError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def journal_of(out: str) -> Path:
    """Where the runs of a benchmark writing ``out`` are journaled as they finish (removed once ``out`` is written)."""
    return Path(out).with_name(Path(out).name + ".partial.jsonl")


def write_records(records: list[dict], path: str | None) -> None:
    """``records`` to ``path`` (JSON, replaced whole), and the versions they ran with to ``versions.json`` beside it
    (``{file name: vcl.coordinator.rundir.versions()}``, the folder's other files kept)."""
    if not path:
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    replace_json(out, records)
    record_versions(out)
    journal_of(path).unlink(missing_ok=True)  # its runs are in the record now
    print(f"wrote {len(records)} records to {out}")


def replace_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(strict_json(obj, indent=1))
    os.replace(tmp, path)


def record_versions(record: Path) -> None:
    """The record file's entry in its folder's ``versions.json``: what the process that wrote it ran with."""
    place = record.parent / "versions.json"
    held = json.loads(place.read_text()) if place.exists() else {}
    held[record.name] = versions()
    replace_json(place, dict(sorted(held.items())))


def summarize(records: list[dict], paper: dict, keys=("dataset", "organizations", "method", "model")) -> str:
    """Markdown: mean (std) and median over seeds of value and best_value, the paper's figure beside."""
    groups = defaultdict(list)
    for r in records:
        groups[tuple(r[k] for k in keys)].append(r)
    lines = [
        "| " + " | ".join(keys) + " | metric | ours: value mean (std) | median | ours: best-over-rounds mean (std)"
        " | paper (best over rounds) | seconds/run |",
        "|" + "---|" * (len(keys) + 6),
    ]
    for key, rs in groups.items():
        vals, best = [r["value"] for r in rs], [r["best_value"] for r in rs]
        scale = 100.0 if rs[0]["metric"] == "accuracy" else 1.0
        ref = paper.get(key)
        lines.append(
            "| " + " | ".join(str(k) for k in key) + f" | {rs[0]['metric']} | {_ms(vals, scale)}"
            f" | {statistics.median(vals) * scale:.1f} | {_ms(best, scale)}"
            f" | {'—' if ref is None else f'{ref[0]:.1f} ({ref[1]:.1f})'}"
            f" | {statistics.median(r['seconds'] for r in rs):.2f} |"
        )
    return "\n".join(lines)


def _ms(values, scale) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values) * scale:.1f} ({sd * scale:.1f})"


def show_overlaps(ax, share: float = 0.01) -> list[str]:
    """Make a curve drawn over an earlier one visible: where a line lies on average within ``share`` of the axis'
    height of an earlier line at the same x (1 %: under a marker's width on the docs' panels), it gets hollow markers
    of its own shape, so that the curve under it shows through, and its legend label says which curve it covers
    ("AL (over Joint)"). The labels it changed."""
    import numpy as np

    lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    xs = [np.asarray(line.get_xdata(), dtype=float) for line in lines]
    ys = [np.asarray(line.get_ydata(), dtype=float) for line in lines]
    low, high = ax.get_ylim()
    changed = []
    for i, line in enumerate(lines):
        for earlier, x, y in zip(lines[:i], xs[:i], ys[:i], strict=True):
            if (
                x.shape == xs[i].shape
                and np.array_equal(x, xs[i])
                and np.nanmean(np.abs(ys[i] - y)) <= share * (high - low)
            ):
                marker = "Ds^vP"[len(changed) % 5]
                line.set(marker=marker, markerfacecolor="none", markersize=6, zorder=3)
                line.set_label(f"{line.get_label()} (over {earlier.get_label().split(' (')[0].split(',')[0]})")
                changed.append(line.get_label())
                break
    return changed
