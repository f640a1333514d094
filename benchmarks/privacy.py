#!/usr/bin/env python
"""Privacy measured alike: every method at every defence level it offers, its main-task performance (MP) beside what
each attack on what its receivers kept achieves (AP), VFLAIR's way (Zou et al., ICLR 2024).

    python benchmarks/privacy.py --quick --out runs/bench/privacy_quick.json   # one seed, ~5 min on 2 cores
    python benchmarks/privacy.py --out runs/bench/privacy.json                 # seeds 0-3
    python benchmarks/privacy.py --only wine gal 'label DP*' --out ...       # the cells that match (fnmatch)

Each run writes its files in a temporary folder and is audited there (``run.audit``, :mod:`vcl.audit`): its record
keeps every attack's score and baseline and each noise's (ε, δ) from the accountant where it is a DP guarantee. Methods
and defences: GAL (M = 8, linear organizations) with no defence, label DP (``gal.privacy dp``: randomized response on
Alice's labels once, or Laplace on diabetes' target clipped to the public [0, 400]) and round DP (``dp_residuals``:
each round's residual bounded in [−1, 1] plus Laplace noise, Alice's state from what she released, composed over the
rounds) at ε = 8, 2, 1, 0.5, the paper's
Laplace on the residuals at α = 10, 1, 0.1 (no DP guarantee), interval privacy, and σ = 5 noise on a random half of
the organizations' outputs; ASCII (two agents, depth-2 trees) as it is; DC (2 × 2 institutions) with
SMOTE anchors at the paper's m_j − 1 dimensions and at 2, random and TSVD anchors; MPDL (the Table IV setting, two
iterations) at ε = 0 (no noise), 2 and 0.5. ASCII, DC and MPDL are classification methods, so diabetes has GAL only.

AP is an attack's gain over its trivial baseline as a share of what there was to gain (accuracy: (score − majority) /
(1 − majority); an error: (baseline − score) / baseline), 0 when it learns nothing and 1 when it recovers everything;
MP is the main-task metric relative to the same method without defence (an error inverted, so 1 is as good). An
attack's AP is the mean over its receivers (every organization receives alike). VFLAIR's
defence capability score, with AP* = 0 and MP* = 1: DCS = 1 / (1 + sqrt((1 − β) AP² + β (1 − MP)²)), β = 0.5, for the
strongest attack on Alice's labels and for the strongest on the organizations' features. Model completion counts only
what the run's outputs add to the receiver's own columns. The picture (``--png``, or docs/figures through
benchmarks/figures.py) draws MP against AP per data set, a panel for each of the two.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from fnmatch import fnmatch
from pathlib import Path

from common import parse_args, run_all, write_records

from vcl.config import RunConfig
from vcl.coordinator.sweep import Job

DATASETS = ["breast_cancer", "wine", "diabetes"]
CLASSIFICATION = ["breast_cancer", "wine"]
BETA = 0.5  # VFLAIR's weight of the main task in DCS
ALICES_SECRET = 0x5EC12E7  # + the run seed: Alice's own seed of her noise in these runs (no party's config holds it)
PARTY_SECRETS = (0xA5EC, 0xB5EC)  # + the run seed: MPDL's parties' own seeds of their h0 noise
DC = {"dc.public_rows": 100, "dc.anchor_rows": 1000, "dc.smote_k": 25, "dc.smote_alpha": 1.5}
SMALL = {"wine": {"dc.public_rows": 30, "dc.anchor_rows": 300, "dc.smote_k": 10}}  # 142 training rows: 112 left
MPDL = {"data.test_fraction": 0.1, "mpdl.gamma": 0.1, "mpdl.threshold": 0.15, "mpdl.max_iterations": 2}
# diabetes: a public bound on the disease-progression score stated in advance, a round range wider than the data's
# (the guarantee needs bounds no one reads from the data; a user states their own)
BOUNDS = {"gal.label_bounds": [0.0, 400.0]}
CELLS = [  # (method, defence, its options, data sets)
    ("gal", "none", {}, DATASETS),
    ("gal", "label DP ε=8", {"gal.privacy": "dp", "gal.privacy_epsilon": 8.0, **BOUNDS}, DATASETS),
    ("gal", "label DP ε=2", {"gal.privacy": "dp", "gal.privacy_epsilon": 2.0, **BOUNDS}, DATASETS),
    ("gal", "label DP ε=1", {"gal.privacy": "dp", "gal.privacy_epsilon": 1.0, **BOUNDS}, DATASETS),
    ("gal", "label DP ε=0.5", {"gal.privacy": "dp", "gal.privacy_epsilon": 0.5, **BOUNDS}, DATASETS),
    ("gal", "round DP ε=8", {"gal.privacy": "dp_residuals", "gal.privacy_epsilon": 8.0}, DATASETS),
    ("gal", "round DP ε=2", {"gal.privacy": "dp_residuals", "gal.privacy_epsilon": 2.0}, DATASETS),
    ("gal", "round DP ε=1", {"gal.privacy": "dp_residuals", "gal.privacy_epsilon": 1.0}, DATASETS),
    ("gal", "round DP ε=0.5", {"gal.privacy": "dp_residuals", "gal.privacy_epsilon": 0.5}, DATASETS),
    ("gal", "residual α=10", {"gal.privacy": "residual_laplace", "gal.privacy_alpha": 10.0}, DATASETS),
    ("gal", "residual α=1", {"gal.privacy": "residual_laplace", "gal.privacy_alpha": 1.0}, DATASETS),
    ("gal", "residual α=0.1", {"gal.privacy": "residual_laplace", "gal.privacy_alpha": 0.1}, DATASETS),
    ("gal", "ip", {"gal.privacy": "ip"}, DATASETS),
    ("gal", "noisy σ=5", {"gal.noisy_organizations": ["half"], "gal.noise_sigma": 5.0}, DATASETS),
    ("ascii", "none", {"data.organizations": 2, "learner.model": ["tree"], "learner.max_depth": 2}, CLASSIFICATION),
    ("dc_smote", "none", {**DC, "dc.dim": -1}, CLASSIFICATION),
    ("dc_smote", "rank 2", {**DC, "dc.dim": 2}, CLASSIFICATION),
    ("dc_rand", "none", {**DC, "dc.dim": -1}, CLASSIFICATION),
    ("dc_tsvd", "none", {**DC, "dc.dim": -1}, CLASSIFICATION),
    ("mpdl", "none", {**MPDL, "mpdl.epsilon": 0.0}, CLASSIFICATION),
    ("mpdl", "ε=2", {**MPDL, "mpdl.epsilon": 2.0}, CLASSIFICATION),
    ("mpdl", "ε=0.5", {**MPDL, "mpdl.epsilon": 0.5}, CLASSIFICATION),
]
QUICK = {"gal": {"run.rounds": 5}, "mpdl": {"mpdl.max_rows": 240, "mpdl.dual_epochs": 2, "mpdl.central_epochs": 3}}


def config(ds: str, method: str, options: dict, seed: int, quick: bool) -> RunConfig:
    values = {"data.dataset": ds, "method": method, "run.seed": seed, "compare": [], "run.device": "cpu"}
    values["gal.privacy_secret"] = ALICES_SECRET + seed  # each noise from its holder's own seed: a record repeats
    values |= {"mpdl.secret_a": PARTY_SECRETS[0] + seed, "mpdl.secret_b": PARTY_SECRETS[1] + seed}
    family = "gal" if method == "gal" else method.split("_")[0]
    small = SMALL.get(ds, {}) if family == "dc" else {}
    return RunConfig.from_dict({**values, **options, **small, **(QUICK.get(family, {}) if quick else {})})


def details(res: dict) -> dict:
    p = res["privacy"]
    return {"attacks": p["attacks"], "budget": p["budget"], "not_attacked": p.get("not_attacked", [])}


LABELS = ("label reading", "label inference", "model completion", "residual recovery")  # attacks on Alice's labels
FEATURES = ("feature inference", "anchor inversion", "feature reconstruction", "h0 inversion", "noise redraw")
TARGETS = {"labels": LABELS, "features": FEATURES}


def gain_share(a: dict) -> float:
    """An attack's share of the way from its trivial baseline to a perfect attack (0: it learned nothing; below 0:
    worse than the baseline). Model completion's floor is the better of the majority rate and the same learner on the
    receiver's own columns alone: only what the run's outputs add counts."""
    own = a["beside"].get("own_columns_alone")
    accuracy = a["metric"] == "accuracy"
    floor = a["baseline"] if own is None else (max if accuracy else min)(a["baseline"], own)
    if accuracy:
        return (a["score"] - floor) / (1.0 - floor) if floor < 1 else 0.0
    return (floor - a["score"]) / floor if floor > 0 else 0.0


def attack_power(attacks: list[dict], worst: bool = False) -> float:
    """AP in [0, 1] of one attack over its receivers: the mean of their gain shares (every organization is a
    receiver alike), or with ``worst`` the receiver that gained most, clipped to [0, 1]."""
    shares = [gain_share(a) for a in attacks]
    return min(1.0, max(0.0, max(shares) if worst else statistics.mean(shares)))


def main_power(record: dict, undefended: float | None) -> float:
    """MP relative to the same method without defence (1: as good; an error inverted so that lower is worse)."""
    if not undefended:
        return 1.0
    return record["value"] / undefended if record["metric"] == "accuracy" else undefended / record["value"]


def dcs(ap: float, mp: float, beta: float = BETA) -> float:
    return 1.0 / (1.0 + math.sqrt((1 - beta) * ap**2 + beta * (1 - mp) ** 2))


def power_of(runs: list[dict], kind: str, worst: bool = False) -> float:
    """One attack kind's AP over the runs (seeds) that ran it: the mean of each run's AP over its receivers (or its
    worst receiver's)."""
    of = [[a for a in r["attacks"] if a["attack"] == kind] for r in runs]
    return statistics.mean(attack_power(attacks, worst) for attacks in of if attacks)


def summary_rows(records: list[dict]) -> list[dict]:
    """One row per (dataset, method, defence): means over seeds of MP, each attack kind's strongest AP, ε, DCS."""
    groups = defaultdict(list)
    for r in records:
        groups[(r["dataset"], r["method"], r["defence"])].append(r)
    undefended = {(ds, m): statistics.mean(r["value"] for r in rs) for (ds, m, d), rs in groups.items() if d == "none"}
    rows = []
    for (ds, method, defence), rs in groups.items():
        kinds = sorted({a["attack"] for r in rs for a in r["attacks"]})

        power = {k: power_of(rs, k) for k in kinds}
        worst = {k: power_of(rs, k, worst=True) for k in kinds}
        mp = statistics.mean(main_power(r, undefended.get((ds, method))) for r in rs)
        # the score counted: the strongest attack run on each target (AP, mean over receivers), and its worst receiver
        strongest = {t: max((power[k] for k in kinds if k in attacks), default=None) for t, attacks in TARGETS.items()}
        exposed = {t: max((worst[k] for k in kinds if k in attacks), default=None) for t, attacks in TARGETS.items()}
        eps = [b["epsilon"] for r in rs for b in r["budget"] if b.get("private")]
        rows.append({"dataset": ds, "method": method, "defence": defence, "metric": rs[0]["metric"],
                     "value": statistics.mean(r["value"] for r in rs), "mp": mp, "ap": power, "strongest": strongest,
                     "worst_receiver": exposed,
                     "dcs": {t: None if ap is None else dcs(ap, mp) for t, ap in strongest.items()},
                     "epsilon": max(eps) if eps else None, "seeds": len(rs)})  # fmt: skip
    return rows


def report(records: list[dict]) -> str:
    rows = summary_rows(records)
    out = []
    for ds in DATASETS:
        mine = [r for r in rows if r["dataset"] == ds]
        if not mine:
            continue
        kinds = sorted({k for r in mine for k in r["ap"]})
        out += [f"**{ds}** (mean over {mine[0]['seeds']} seed(s); AP: each attack's mean over its receivers)", "",
                "| method | defence | test metric | MP | " + " | ".join(f"AP {k}" for k in kinds)
                + " | strongest AP labels (worst receiver) | strongest AP features (worst receiver) | ε (δ = 1e-5) | "
                "DCS labels | DCS features |",
                "|---|---|---|---|" + "---|" * len(kinds) + "---|---|---|---|---|"]  # fmt: skip
        for r in mine:
            aps = " | ".join(f"{r['ap'][k]:.2f}" if k in r["ap"] else "—" for k in kinds)
            eps = "—" if r["epsilon"] is None else f"{r['epsilon']:.3g}"
            scores = " | ".join("—" if r["dcs"][t] is None else f"{r['dcs'][t]:.3f}" for t in TARGETS)
            counted = " | ".join("—" if r["strongest"][t] is None else
                                 f"{r['strongest'][t]:.2f} ({r['worst_receiver'][t]:.2f})"
                                 for t in TARGETS)  # fmt: skip
            out.append(f"| {r['method']} | {r['defence']} | {r['value']:.4g} | {r['mp']:.3f} | {aps} | {counted} | "
                       f"{eps} | {scores} |")  # fmt: skip
        gains = completion_gains([r for r in records if r["dataset"] == ds])
        if gains:
            shown = ", ".join(f"{d} {g:+.4f}".replace("-", "−") for d, g in gains.items())  # a minus the docs quote
            out += ["", f"Model completion over the same learner on the receiver's own columns alone (the mean over "
                    f"every receiver and seed): {shown}."]  # fmt: skip
        out.append("")
    return "\n".join(out)


def completion_gains(records: list[dict]) -> dict[str, float]:
    """Per defence, the mean of model completion's score over the learner on the receiver's own columns alone (an
    error's decrease), over every receiver and seed: what the run's outputs add to what it held already."""
    gains = defaultdict(list)
    for r in records:
        for a in r["attacks"]:
            if a["attack"] == "model completion":
                own = a["beside"]["own_columns_alone"]
                gains[r["defence"]].append(a["score"] - own if a["metric"] == "accuracy" else own - a["score"])
    return {d: statistics.mean(g) for d, g in gains.items()}


MARKERS = {"gal": "o", "ascii": "s", "dc_smote": "^", "dc_rand": "v", "dc_tsvd": "<", "mpdl": "D"}


NAMES = {"gal": "GAL", "ascii": "ASCII", "dc_smote": "DC(SMOTE)", "dc_rand": "DC(rand)", "dc_tsvd": "DC(TSVD)",
         "mpdl": "MPDL"}  # the papers' names in the pictures' legends  # fmt: skip


def draw(records: list[dict], path: Path, dpi: int, dataset: str) -> None:
    """MP against AP for every method and defence on ``dataset``, one panel for the attacks on Alice's labels and one
    for those on the organizations' features (each point: the strongest attack of its kind, each attack's AP the mean
    over its receivers and the record's seeds); the top left is private and accurate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in summary_rows(records) if r["dataset"] == dataset]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True)
    for ax, target in zip(axes, TARGETS, strict=True):
        for method in dict.fromkeys(r["method"] for r in rows):
            mine = [r for r in rows if r["method"] == method and r["strongest"][target] is not None]
            if not mine:
                continue
            ax.scatter([r["strongest"][target] for r in mine], [r["mp"] for r in mine],
                       marker=MARKERS.get(method, "o"), s=46, label=NAMES.get(method, method))  # fmt: skip
            for r in mine:
                ax.annotate(r["defence"], (r["strongest"][target], r["mp"]), fontsize=7, xytext=(4, 3),
                            textcoords="offset points")  # fmt: skip
        ax.set_xlim(-0.05, 1.1)
        ax.set_xlabel(f"AP on the {target}: share of the way from the trivial baseline to perfect (0: learns nothing)",
                      fontsize=8)  # fmt: skip
        ax.set_title(f"attacks on {'Alice’s labels' if target == 'labels' else 'the organizations’ features'}",
                     fontsize=10)  # fmt: skip
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("MP: test metric relative to the method without defence")
    axes[1].legend(fontsize=8, loc="center")
    seeds = max((r["seeds"] for r in rows), default=0)
    fig.suptitle(f"{dataset}: main task against attack, mean over {seeds} seed(s) (benchmarks/privacy.py)",
                 fontsize=10)  # fmt: skip
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def options(p) -> None:
    p.add_argument("--png", default=None, help="picture prefix")
    p.add_argument("--only", nargs=3, action="append", metavar=("DATA", "METHOD", "DEFENCE"),
                   help="run only the cells that match (fnmatch patterns; repeat for more)")  # fmt: skip


def chosen(only: list | None, ds: str, method: str, defence: str) -> bool:
    return not only or any(fnmatch(ds, d) and fnmatch(method, m) and fnmatch(defence, f) for d, m, f in only)


def main() -> None:
    args = parse_args(__doc__.split("\n")[0], options)
    seeds = args.seeds[:1] if args.quick else args.seeds
    jobs = []
    for method, defence, options_, datasets in CELLS:
        for ds in (d for d in datasets if chosen(args.only, d, method, defence)):
            for seed in seeds:
                cfg = config(ds, method, options_, seed, args.quick)
                model = "tree" if method == "ascii" else "linear"
                jobs.append(Job("privacy", cfg, method, model, details, {"defence": defence}))
    if not jobs:
        print(f"error: --only {args.only} matches no cell; the cells are {[c[:2] for c in CELLS]}.", file=sys.stderr)
        sys.exit(2)
    records = run_all(jobs, args)
    write_records(records, args.out)
    print(report(records))
    if args.png:
        for ds in DATASETS:
            draw(records, Path(f"{args.png}_{ds}.png"), 110, ds)


if __name__ == "__main__":
    main()
