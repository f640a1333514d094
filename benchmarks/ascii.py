#!/usr/bin/env python
"""ASCII Figures 3, 4 and 6 on the data we have: ASCII against Single and Oracle, the transmission cost
against sending B's raw data, and ASCII against ASCII-Random, ASCII-Simple and Ensemble-AdaBoost.

    python benchmarks/ascii.py --quick --out runs/bench/ascii_quick.json   # about three minutes, seed 0
    python benchmarks/ascii.py --out runs/bench/ascii.json                 # 20 replications (seeds 0-19)

ASCII and ASCII-Random run with both α rules (``ascii_alpha``): ``exact`` (the minimizer of eq. 6's joint
loss given the scores received; ASCII then fits what ASCII-Simple fits) and ``paper`` (eqs 11/13 as
printed); the tables and plots name them ``ascii[exact]``, ``ascii[paper]``. Simple, Ensemble-AdaBoost,
Single and Oracle do not depend on the rule.

- Fig. 3: blobs (10 classes, 8 features, four agents with two columns, random forests), wine and
  breast_cancer (two agents, decision trees); methods ascii, single, oracle. "wine" is scikit-learn's
  wine (178 rows, 13 features, 3 classes), not the paper's Red Wine Quality (1,600 rows, 11 features,
  6 classes), which is not shipped here.
- Fig. 4: the 200-feature blob (5 informative + 195 redundant, two agents of 100, random forests) and
  digits left/right halves with MLPs (the quick stand-in; ``--figures fashion``, after ``make data``: Fig. 4(b) on
  Fashion-MNIST's halves with 3-layer networks, alone); bits sent by ASCII until it first reaches 90 % of the
  oracle's test accuracy, against B's raw training columns (float32).
- Fig. 6: 20-class blobs with 20 one-feature agents (logistic regression) and scikit-learn's wine with one
  feature per agent (13 agents, decision trees); methods ascii, ascii_random, ascii_simple, ensemble_adaboost.

Synthetic data: train 10³ / test 10⁵ (``--quick``: 5·10³ test rows), new data every replication
(``split_seed`` = seed). Real data: 70/30 row splits, a new split every replication; with ``--bootstrap`` the 70 %
is replaced by as many rows drawn from it with replacement (``data.bootstrap``), the other reading of the paper's
"re-sampled with replacement 20 times", and only the real data runs. ``--figures`` runs some of the figures
only. The paper gives figures, not tables, so the claims table sets its qualitative statements beside our numbers. A run
that stops (α ≤ 0) keeps its last model: its curve is extended flat to the last round.
Saves ``<out>.fig3.png``, ``.fig4.png`` and ``.fig6.png`` (mean test accuracy per round).

- Fig. 1 (``--figures fig1`` only; not in the default list): the toy ``ascii_blobs9`` (9 classes on a 3 × 3 grid of
  two features, one feature per agent, depth-2 trees, 2,000 test rows), Single (Alice alone) and ASCII. Each run is
  kept in a run directory and scored again through ``train.py predict``'s path (:class:`vcl.use.predict.Deployed`);
  its record keeps every test point's two features and label and each panel's predicted labels (Single at the last
  round, ASCII at round 1 and at the last round), so :func:`draw_fig1` draws the figure (``<out>.fig1.png``) from
  the record alone.

    python benchmarks/ascii.py --figures fig1 --seeds 0 --out runs/bench/ascii_fig1.json
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from functools import partial
from pathlib import Path

from common import check_fashion, parse_args, run_all, show_overlaps, summarize, write_records
from departures import Departure, Experiment

from vcl.config import RunConfig
from vcl.coordinator.sweep import Job

TREE_DEPTH = 2  # weak decision trees: unlimited depth fits the training rows exactly (α = ∞, nothing to boost)
FOREST = {"learner.n_trees": 20, "learner.max_depth": 4}  # the paper gives neither (departure ascii-forests)
FIG3 = ("ascii", "single", "oracle")
FIG6 = ("ascii", "ascii_random", "ascii_simple", "ensemble_adaboost")
ALPHA_RULES = ("exact", "paper")
FAR = 0.05  # what "far above" is taken to mean in the claims table (the paper gives no number)
JOINT = ("ascii", "ascii_random")  # the methods whose α depends on ascii_alpha
FIG1 = ("single", "ascii")  # Alice alone and ASCII on the toy
FIG1_DATA = {"data.dataset": "ascii_blobs9", "data.organizations": 2, "data.synthetic_test": 2000}
FIG1_POINTS = 2000  # at most this many test points kept per record (a seeded subsample beyond)
WINE = "scikit-learn's wine: 178 rows, 3 classes; not the paper's Red Wine Quality, 1,600 rows, 6 classes"


def label(method: str, alpha: str | None) -> str:
    """``ascii[exact]``, ``ascii_random[paper]``; the other methods by name."""
    return f"{method}[{alpha}]" if alpha else method


def runs(methods):
    """(method, ascii_alpha or None) for every run: both rules where the method depends on it."""
    for method in methods:
        if method in JOINT:
            yield from ((method, a) for a in ALPHA_RULES)
        else:
            yield method, None


def shown(dataset: str) -> str:
    return "wine (scikit-learn's, 178 rows, 3 classes; not Red Wine Quality)" if dataset == "wine" else dataset


FASHION = {  # Fig. 4(b) as the paper: two agents, half of every image each, 3-layer networks (392 → 128 → 64 → 10)
    "learner.hidden": [128, 64],
    "learner.epochs": 10,  # the paper gives none; 10 epochs a fit on 2 cores (departure ascii-fashion-epochs)
    "learner.milestones": [7],
    "learner.batch_size": 256,
}


def experiments(quick: bool, fashion: bool = False):
    """(figure, dataset, M, learner, extra config, methods); ``fashion``: Fig. 4(b) on Fashion-MNIST's halves alone."""
    if fashion:
        yield "fig4", "fashion_mnist_halves", 2, "mlp", FASHION, FIG3
        return
    test = {"data.synthetic_test": 5000 if quick else 100000}
    yield "fig3", "ascii_blobs", 4, "forest", {**FOREST, **test}, FIG3
    # breast_cancer and scikit-learn's wine for MIMIC, QSAR and Red Wine (departure ascii-fig3-data)
    yield "fig3", "wine", 2, "tree", {"learner.max_depth": TREE_DEPTH, "data.test_fraction": 0.3}, FIG3
    yield "fig3", "breast_cancer", 2, "tree", {"learner.max_depth": TREE_DEPTH, "data.test_fraction": 0.3}, FIG3
    yield "fig4", "ascii_blobs_redundant", 2, "forest", {**FOREST, **test}, FIG3
    mlp = {
        "learner.epochs": 30 if quick else 100,
        "learner.milestones": [20 if quick else 50],
        "learner.hidden": [64],
        "data.test_fraction": 0.3,
    }
    yield "fig4", "digits_halves", 2, "mlp", mlp, FIG3  # the paper: 3 layers (departure ascii-fig4-mlp)
    yield "fig6", "ascii_blobs20", 20, "logistic", test, FIG6
    # 13 one-feature agents on wine; the paper: 11 on Red Wine (departure ascii-fig6-agents)
    yield "fig6", "wine", 13, "tree", {"learner.max_depth": TREE_DEPTH, "data.test_fraction": 0.3}, FIG6


def rounds_of(quick: bool, fashion: bool) -> int:
    return 5 if quick or fashion else 10  # the paper: 10 (departure ascii-fashion-rounds)


def config(ds: str, m: int, method: str, learner: str, seed: int, rounds: int, extra: dict, alpha=None) -> RunConfig:
    values = {"data.dataset": ds, "data.organizations": m, "method": method, "learner.model": [learner],
              "run.seed": seed, "data.split_seed": seed, "run.rounds": rounds, "compare": [], "run.device": "cpu",
              **extra}  # fmt: skip
    return RunConfig.from_dict(values | ({"ascii.alpha": alpha} if alpha else {}))


# the paper's settings (Section VI): Figure 3 on Blob (4 agents), MIMIC, QSAR and Red Wine (2 agents each), Figure
# 4 on the redundant blobs and Fashion-MNIST's halves (2 agents), Figure 6 on 20-class blobs (20 agents) and Red Wine
# (11 one-feature agents); 10 rounds
DEPARTURES = {
    "fig3": Departure("ascii-fig3-data", "ascii.md", "scikit-learn's breast_cancer and wine stand in for MIMIC, QSAR "
                      "and Red Wine", ("data.dataset",)),
    "forests": Departure("ascii-forests", "ascii.md", "the random forests: 20 trees of depth 4 (the paper gives "
                         "neither)"),
    "fig4": Departure("ascii-fig4-mlp", "ascii.md", "Figure 4(b) with a one-hidden-layer MLP on scikit-learn's 8 × 8 "
                      "digits' halves against a 3-layer network on Fashion-MNIST's", ("data.dataset",)),
    "fig6": Departure("ascii-fig6-agents", "ascii.md", "Figure 6 with 13 one-feature agents on scikit-learn's wine "
                      "against 11 on Red Wine", ("data.dataset", "data.organizations")),
    "rounds": Departure("ascii-fashion-rounds", "ascii.md", "on Fashion-MNIST itself (`--figures fashion`, after "
                        "`make data`), 5 rounds, not 10", ("run.rounds",)),
    "epochs": Departure("ascii-fashion-epochs", "ascii.md", "on Fashion-MNIST, the 3-layer network (392 → 128 → 64 → "
                        "10) fitted 10 epochs a round (the paper gives no epochs)"),
}  # fmt: skip


def declare() -> list[Experiment]:
    """Figures 3, 4 and 6 as the benchmark runs them (departures.py)."""

    def runs(figure: str, fashion: bool = False) -> list:
        return [config(ds, m, "ascii", learner, 0, rounds_of(False, fashion), extra)
                for fig, ds, m, learner, extra, _ in experiments(False, fashion) if fig == figure]  # fmt: skip

    d, command = DEPARTURES, "benchmarks/ascii.py"
    fig3 = {"data.dataset": {"ascii_blobs", "mimic_los7", "qsar", "red_wine"}, "data.organizations": {2, 4},
            "run.rounds": 10}  # fmt: skip
    fig4 = {
        "data.dataset": {"ascii_blobs_redundant", "fashion_mnist_halves"},
        "data.organizations": 2,
        "run.rounds": 10,
    }
    fig6 = {"data.dataset": {"ascii_blobs20", "red_wine"}, "data.organizations": {20, 11}, "run.rounds": 10}
    return [
        Experiment("ASCII", "Figure 3", command, fig3, runs("fig3"), (d["fig3"], d["forests"])),
        Experiment("ASCII", "Figure 4", command, fig4, runs("fig4"), (d["fig4"], d["forests"])),
        Experiment("ASCII", "Figure 4(b)", f"{command} --figures fashion",
                   {**fig4, "data.dataset": "fashion_mnist_halves"}, runs("fig4", True), (d["rounds"], d["epochs"])),
        Experiment("ASCII", "Figure 6", command, fig6, runs("fig6"), (d["fig6"],)),
    ]  # fmt: skip


def details(res: dict) -> dict:
    return {
        "curve": [r["metrics"]["test"] for r in res["rounds"]],
        "interchange_bytes": [r.get("interchange_bytes", 0) for r in res["rounds"]],
        "stopped": res["rounds"][-1].get("stopped"),
    }


def raw_bytes_of_b(cfg: RunConfig) -> int:
    """What the oracle needs moved: B's (the second agent's) training columns as float32."""
    from vcl.coordinator.assembly import datamodule_for

    dm = datamodule_for(cfg)
    dm.setup()
    return 4 * dm.data.views[1].splits["train"].numel()


def flat(curve: list[float], rounds: int) -> list[float]:
    return curve + [curve[-1]] * (rounds + 1 - len(curve))


def mean_curves(records: list[dict], rounds: int) -> dict:
    out = defaultdict(list)
    for r in records:
        out[(r["figure"], r["dataset"], label(r["method"], r["alpha"]))].append(flat(r["curve"], rounds))
    return {k: [statistics.mean(c) for c in zip(*v, strict=True)] for k, v in out.items()}


def transmission(records: list[dict]) -> list[dict]:
    """Fig. 4: ASCII's bits until 90 % of the oracle's (final) test accuracy, against B's raw columns."""
    oracle = {(r["dataset"], r["seed"]): r["value"] for r in records if r["method"] == "oracle"}
    rows = []
    for r in records:
        if r["method"] != "ascii" or r["figure"] != "fig4":
            continue
        target = 0.9 * oracle[(r["dataset"], r["seed"])]
        hit = next((t for t, acc in enumerate(r["curve"]) if acc >= target), None)
        sent = None if hit is None else 8 * sum(r["interchange_bytes"][: hit + 1])
        raw = 8 * r["raw_bytes_b"]
        rows.append(
            {
                "dataset": r["dataset"],
                "alpha": r["alpha"],
                "seed": r["seed"],
                "round": hit,
                "ascii_bits": sent,
                "raw_bits": raw,
            }
        )
    return rows


NAMES = {  # the paper's names in the legends; vcl's α rule beside ASCII's (``--ascii.alpha``)
    "single": "Single",
    "oracle": "Oracle",
    "ascii_simple": "ASCII-Simple",
    "ensemble_adaboost": "Ensemble-AdaBoost",
    "ascii[exact]": "ASCII, vcl's α (ascii.alpha exact)",
    "ascii[paper]": "ASCII, α of eqs 11/13 (ascii.alpha paper)",
    "ascii_random[exact]": "ASCII-Random, vcl's α (exact)",
    "ascii_random[paper]": "ASCII-Random, α of eqs 11/13 (paper)",
}
DATA = {  # each panel's data, on the picture; the stand-ins say what they stand in for
    "ascii_blobs": "Blob (8 features, 10 classes)",
    "ascii_blobs20": "Blob (20 features, 20 classes)",
    "ascii_blobs_redundant": "Blob, 5 informative + 195 noise features",
    "digits_halves": "digits halves (8 × 8; stand-in for\nthe paper's Fashion-MNIST halves)",
    "fashion_mnist_halves": "Fashion-MNIST halves (28 × 14 each;\n60,000 training, 10,000 test images)",
    "breast_cancer": "breast_cancer (scikit-learn; stand-in for\nthe paper's MIMIC and QSAR)",
    "wine": "wine (scikit-learn: 178 rows, 3 classes;\nstand-in for the paper's Red Wine Quality)",
}


def plot(curves: dict, figure: str, path: Path, title: str, dpi: int = 110, replications: int | None = None) -> None:
    """Test accuracy (%) per round of every method on each data set of ``figure`` (means over the replications)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({d for f, d, _ in curves if f == figure})
    if not datasets:  # a figure left out (--figures, --bootstrap)
        return
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.6 * len(datasets), 3.9), squeeze=False)
    for ax, ds in zip(axes[0], datasets, strict=True):
        for (f, d, method), curve in curves.items():
            if f == figure and d == ds:
                dashed = method.endswith("[paper]")
                ax.plot(range(len(curve)), [100 * v for v in curve], marker="o", ms=3, ls="--" if dashed else "-",
                        label=NAMES.get(method, method))  # fmt: skip
        ax.set_title(DATA.get(ds, ds), fontsize=9)
        ax.set_xlabel("round of assistance")
        ax.set_ylabel("test accuracy (%)")
        show_overlaps(ax)  # ASCII's curve lies on ASCII-Simple's in Figure 6: hollow markers, said in the legend
        ax.legend(fontsize=7)
    mean = f"; means over {replications} replications" if replications else ""
    fig.suptitle("\n".join(textwrap.wrap(title + mean, int(11 * 4.6 * len(datasets)))), fontsize=10)  # on the canvas
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    print(f"saved {path}")


def verdict(ok: bool) -> str:
    return "yes" if ok else "no"


def claims(curves: dict, cost: list[dict], rounds: int) -> str:
    def at(fig, ds, method, t):
        return curves.get((fig, ds, method), [float("nan")] * (rounds + 1))[t]

    pct = lambda v: f"{100 * v:.1f}"  # noqa: E731
    lines = ["| paper's claim | α rule | ours (mean over seeds, test accuracy %) | holds? |", "|---|---|---|---|"]
    ran = {(f, d) for f, d, _ in curves}
    for ds in ("ascii_blobs", "wine", "breast_cancer"):
        for alpha in ALPHA_RULES if ("fig3", ds) in ran else ():
            a = label("ascii", alpha)
            a3, s, o = (
                at("fig3", ds, a, min(3, rounds)),
                at("fig3", ds, "single", rounds),
                at("fig3", ds, "oracle", rounds),
            )
            ok = a3 >= s + FAR and a3 >= o - 0.03
            lines.append(
                f"| Fig. 3 {shown(ds)}: ASCII far above Single (here: by {100 * FAR:.0f} points or more), near Oracle "
                f"(within 3) within a few rounds | {alpha} | ASCII "
                f"round 3: {pct(a3)}, final {pct(at('fig3', ds, a, rounds))}; Single {pct(s)}; Oracle {pct(o)} "
                f"| {verdict(ok)} |"
            )
    for ds, paper in (("ascii_blobs_redundant", "about 10×"), ("digits_halves", "over 100× (Fashion-MNIST)"),
                      ("fashion_mnist_halves", "about 195×")):  # fmt: skip
        for alpha in ALPHA_RULES if ("fig4", ds) in ran else ():
            rows = [c for c in cost if c["dataset"] == ds and c["alpha"] == alpha and c["ascii_bits"]]
            if rows:
                ratio = statistics.median(c["raw_bits"] / c["ascii_bits"] for c in rows)
                reach = statistics.median(c["round"] for c in rows)
                text = f"B's raw columns / ASCII's bits at 90 % of Oracle: {ratio:.0f}× (median; round {reach:g})"
                ok = ratio >= 10
            else:
                text, ok = "ASCII never reached 90 % of the oracle", False
            lines.append(
                f"| Fig. 4 {ds}: transmission {paper} below sending B's data | {alpha} | {text} | {verdict(ok)} |"
            )
    for ds in ("ascii_blobs20", "wine"):
        for alpha in ALPHA_RULES if ("fig6", ds) in ran else ():
            names = (label("ascii", alpha), label("ascii_random", alpha), "ascii_simple", "ensemble_adaboost")
            vals = {m: at("fig6", ds, m, rounds) for m in names}
            early = {m: at("fig6", ds, m, 1) for m in names}
            v = list(vals.values())
            order = v[0] >= v[1] >= v[2] > v[3]
            same = curves.get(("fig6", ds, names[0])) == curves.get(("fig6", ds, "ascii_simple"))
            lines.append(
                f"| Fig. 6 {shown(ds)}: ASCII ≥ ASCII-Random ≥ ASCII-Simple > Ensemble-AdaBoost | {alpha} | final "
                + ", ".join(f"{m} {pct(x)}" for m, x in vals.items())
                + "; round 1 "
                + ", ".join(f"{pct(x)}" for x in early.values())
                + f"; ASCII's curve {'=' if same else '≠'} ASCII-Simple's | {verdict(order)} |"
            )
    return "\n".join(lines)


def report(records: list[dict]) -> str:
    """The tables and the paper's claims checked, from this benchmark's records."""
    rounds = max(len(r["curve"]) for r in records) - 1
    table = summarize(records, {}, keys=("figure", "dataset", "organizations", "variant", "model"))
    text = f"{table}\n\nwine: {WINE}.\n\n{claims(mean_curves(records, rounds), transmission(records), rounds)}"
    toy = fig1_lines(records)
    return f"{text}\n\n{toy}" if toy else text


def fig1_run(method: str, seed: int, rounds: int, panel_rounds=(1,)) -> dict:
    """Fig. 1: one run of ``method`` on the toy, kept in a temporary run directory and scored again through
    ``train.py predict``'s path (:class:`vcl.use.predict.Deployed`, the test split of a built-in data set); for
    ASCII also a run stopped at each of ``panel_rounds`` (the same first rounds: the runs are seeded), as the
    prediction stage scores a run at its last round. The record is the other runs' record plus ``points`` (every
    test point's two features in the data's own units, and its label; a seeded subsample of ``FIG1_POINTS``
    where there are more) and ``panels`` (per panel: round, test accuracy on all test rows, predicted labels)."""
    from vcl.coordinator.runner import train
    from vcl.coordinator.sweep import seconds_per_round

    values = {**FIG1_DATA, "method": method, "learner.model": ["tree"], "learner.max_depth": TREE_DEPTH}
    values |= {"run.seed": seed, "data.split_seed": seed, "compare": [], "run.device": "cpu"}
    alpha = "exact" if method in JOINT else None
    values |= {"ascii.alpha": alpha} if alpha else {}
    ends = [t for t in panel_rounds if t < rounds] if method == "ascii" else []
    panels, points, res, seconds = [], None, None, 0.0
    with tempfile.TemporaryDirectory(prefix="ascii_fig1_") as tmp:
        for t in [*ends, rounds]:
            cfg = RunConfig.from_dict({**values, "run.rounds": t, "out": f"{tmp}/rounds{t}"})
            start = time.perf_counter()
            res = train(cfg, verbose=False)
            seconds = time.perf_counter() - start  # the last (full) run's
            scored = predicted_points(cfg.run_dir)
            curve = [r["metrics"]["test"] for r in res["rounds"]]
            if abs(scored["accuracy"] - curve[scored["round"]]) > 1e-6:  # the kept models give the run's figure
                raise RuntimeError(f"{method} round {scored['round']}: {scored['accuracy']} scored, {curve} run")
            points = points or scored["points"]
            panels.append({k: scored[k] for k in ("round", "accuracy", "prediction")})
    return {
        "benchmark": "ascii",
        "dataset": FIG1_DATA["data.dataset"],
        "method": method,
        "model": "tree",
        "organizations": FIG1_DATA["data.organizations"],
        "seed": seed,
        "metric": res["metric"],
        "value": res["value"],
        "best_value": res["best_value"],
        "figure": "fig1",
        "alpha": alpha,
        "variant": label(method, alpha),
        "seconds": seconds,
        "seconds_per_round": seconds_per_round(res),
        "round_seconds": res["round_seconds"],
        "bytes_sent": res["bytes_sent"],
        **details(res),
        "points": points,
        "panels": panels,
    }


def predicted_points(run_dir: Path, limit: int = FIG1_POINTS) -> dict:
    """A finished run's predicted class of every test row (``train.py predict``'s scoring), with the rows' features
    (each agent's columns, un-z-scored) and labels, floats to 4 decimals: ``{"round", "accuracy", "points",
    "prediction"}``; ``points`` holds ``features`` (the columns' names, Alice's first), one list per column, and
    ``label``. ``accuracy`` is over all test rows; the lists hold ``limit`` rows at most (a seeded subsample)."""
    import numpy as np

    from vcl.use.predict import Deployed

    deployed = Deployed(run_dir, [])
    try:
        predicted = deployed.score()["F"].argmax(1).numpy()
    finally:
        deployed.close()
    labels = deployed.data.labels[deployed.split].numpy()
    keep = np.arange(len(labels))
    if len(keep) > limit:
        keep = np.sort(np.random.RandomState(0).choice(len(keep), limit, replace=False))
    points = {"features": [], "label": labels[keep].tolist()}
    for view in deployed.data.views:
        prep = view.preparation
        raw = view.splits[deployed.split].numpy().astype(np.float64) * prep.std + prep.mean
        for j, column in enumerate(view.columns):
            points["features"].append(column)
            points[column] = np.round(raw[keep, j], 4).tolist()
    return {
        "round": deployed.round,
        "accuracy": float((predicted == labels).mean()),
        "points": points,
        "prediction": predicted[keep].tolist(),
    }


def fig1_panels(records: list[dict]) -> tuple[dict, list[tuple[str, dict]]]:
    """The points and the (title, panel) pairs of Fig. 1 from the records of the first seed: Alice alone (Single),
    then ASCII at each kept round."""
    toy = [r for r in records if r.get("figure") == "fig1"]
    if not toy:
        return {}, []
    seed = min(r["seed"] for r in toy)
    toy = sorted((r for r in toy if r["seed"] == seed), key=lambda r: r["method"] != "single")
    out = []
    for r in toy:
        name = "A alone (Single)" if r["method"] == "single" else f"ASCII ({r['variant']})"
        out.extend((f"{name}, round {p['round']}", p) for p in r["panels"])
    return toy[0]["points"], out


def fig1_lines(records: list[dict]) -> str:
    """Fig. 1's panels in a sentence: each panel's test accuracy."""
    _, panels = fig1_panels(records)
    if not panels:
        return ""
    shown = "; ".join(f"{title}: {100 * p['accuracy']:.1f} %" for title, p in panels)
    return f"Fig. 1 (ascii_blobs9, one feature per agent, depth-2 trees; test accuracy): {shown}."


def draw_fig1(records: list[dict], path: Path, dpi: int = 110) -> None:
    """ASCII's Fig. 1 from ``fig1`` records: the test points in the plane of the two features (Alice's on the x
    axis), blue where the panel's prediction is right, red where it is wrong; one panel for Alice alone and one per
    kept round of ASCII, titled with the test accuracy. Saves a PNG to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points, panels = fig1_panels(records)
    if not panels:
        return
    xs, ys = points["features"][:2]
    label_of = points["label"]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.7), squeeze=False)
    for ax, (title, panel) in zip(axes[0], panels, strict=True):
        right = [p == y for p, y in zip(panel["prediction"], label_of, strict=True)]
        for ok, colour, name in ((True, "tab:blue", "correct"), (False, "tab:red", "incorrect")):
            chosen = [i for i, r in enumerate(right) if r == ok]
            ax.scatter([points[xs][i] for i in chosen], [points[ys][i] for i in chosen], s=4, c=colour,
                       label=name, linewidths=0)  # fmt: skip
        title = title.replace("(ascii[exact])", "(vcl's α, exact)").replace("(ascii[paper])", "(α of eqs 11/13)")
        ax.set_title(f"{title}\ntest accuracy {100 * panel['accuracy']:.1f} %", fontsize=9)
        ax.set_xlabel(f"{xs} (agent A's feature)")
        ax.set_ylabel(f"{ys} (agent B's feature)")
    axes[0][0].legend(fontsize=7, loc="upper left", markerscale=2, framealpha=0.9)
    seeds = sorted({r["seed"] for r in records if "seed" in r})
    fig.suptitle("ASCII Figure 1 on ascii_blobs9: 9 blobs on a 3 × 3 grid (the paper gives neither), one feature per "
                 f"agent, depth-2 trees; seed {', '.join(map(str, seeds))}", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    print(f"saved {path}")


def options(p) -> None:
    p.add_argument("--bootstrap", action="store_true", help="real data: train on a draw with replacement of the 70%% "
                   "(data.bootstrap), the paper's 'resampled with replacement'")  # fmt: skip
    p.add_argument("--figures", nargs="+", default=["fig3", "fig4", "fig6"],
                   help="which figures to run (fig1, the toy, and fashion, Fig. 4(b) on Fashion-MNIST after make "
                   "data, only when named)")  # fmt: skip


def main() -> None:
    args = parse_args(__doc__, options)
    seeds = args.seeds if "--seeds" in sys.argv else ([0] if args.quick else list(range(20)))
    rounds = rounds_of(args.quick, "fashion" in args.figures)
    jobs = []
    if "fashion" in args.figures:
        check_fashion()
    for figure, ds, m, learner, extra, methods in experiments(args.quick, "fashion" in args.figures):
        if figure not in args.figures and not ds.startswith("fashion"):
            continue
        if args.bootstrap:  # the real data's 70/30 splits only: the synthetic data is new every replication anyway
            if "data.test_fraction" not in extra:
                continue
            extra = {**extra, "data.bootstrap": True}
        for method, alpha in runs(methods):
            for seed in seeds:
                cfg = config(ds, m, method, learner, seed, rounds, extra, alpha)
                raw = {"raw_bytes_b": raw_bytes_of_b(cfg)} if figure == "fig4" and method == "ascii" else {}
                tags = {"figure": figure, "alpha": alpha, "variant": label(method, alpha), **raw}
                tags |= {"bootstrap": True} if extra.get("data.bootstrap") else {}
                jobs.append(Job("ascii", cfg, method, learner, details, tags))
    if "fig1" in args.figures:
        jobs.extend(partial(fig1_run, method, seed, rounds) for method in FIG1 for seed in seeds)
    records = run_all(jobs, args)
    write_records(records, args.out)
    print(report(records))
    curves = mean_curves(records, rounds)
    base = Path(args.out or "runs/bench/ascii.json")
    base.parent.mkdir(parents=True, exist_ok=True)
    plot(curves, "fig3", base.with_suffix(".fig3.png"), "ASCII vs Single and Oracle (cf. Fig. 3)")
    seeds = len({r["seed"] for r in records})
    plot(curves, "fig4", base.with_suffix(".fig4.png"), "Transmission-cost settings (cf. Fig. 4)", replications=seeds)
    plot(curves, "fig6", base.with_suffix(".fig6.png"), "ASCII and its variants (cf. Fig. 6)")
    draw_fig1(records, base.with_suffix(".fig1.png"))


if __name__ == "__main__":
    main()
