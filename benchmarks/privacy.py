#!/usr/bin/env python
"""Privacy measured alike: every method at every defence level it offers, its main-task performance (MP) beside what
each attack on what its receivers kept achieves (AP), VFLAIR's way (Zou et al., ICLR 2024).

    python benchmarks/privacy.py --quick --out runs/bench/privacy_quick.json   # one seed, ~5 min on 2 cores
    python benchmarks/privacy.py --out runs/bench/privacy.json                 # seeds 0-3
    python benchmarks/privacy.py --only wine gal 'label DP*' --out ...       # the cells that match (fnmatch)

Each run writes its files in a temporary folder and is audited there (``run.audit``, :mod:`vcl.audit`): its record
keeps every attack's score beside its two baselines (the trivial one and the attacker's own data alone), the strongest
attack on each receiver-target pair at 0, 10 and 40 known rows (``counted``), and each noise's (ε, δ) from the
accountant where it is a DP guarantee. Methods and defences: GAL (M = 8, linear organizations) with no defence, label
DP (``gal.privacy dp``: randomized response on Alice's labels once, or Laplace on diabetes' target clipped to the
public [0, 400]) and round DP (``dp_residuals``: each round's residual bounded in [−1, 1] plus Laplace noise, Alice's
state from what she released, from F⁰ = 0 or diabetes' public midpoint 200, composed over the rounds) at
ε = 8, 2, 1, 0.5, the paper's Laplace on the residuals
at α = 10, 1, 0.1 (no DP guarantee), interval privacy, σ = 5 noise on a random half of the organizations' outputs,
and no defence with MLP and with gradient-boosting organizations (whose outputs model completion can learn from);
Interm fusion on VFLAIR's breast cancer split (two parties, MLP bottom models: its per-row gradients); ASCII (two
agents, depth-2 trees) as it is; DC (2 × 2 institutions) with SMOTE anchors at the paper's m_j − 1 dimensions and
at 2, random and TSVD anchors; MPDL (the Table IV setting, two iterations) at ε = 0 (no noise), 2 and 0.5. ASCII,
DC and MPDL are classification methods, so diabetes has GAL only.

An attack's share is its gain over the better of its two baselines as a share of what there was to gain (accuracy:
(score − floor) / (1 − floor); an error: (floor − score) / floor), 0 when the messages add nothing the attacker could
not learn without them and 1 when it recovers everything. AP, per secret (Alice's labels, the organizations'
features), is the mean over the receiver-target pairs of the strongest attack's share (at the most known rows, and
by count of known rows in its own columns), beside the worst pair; MP is the main-task metric relative to the same
method without defence (an error inverted, so 1 is as good), the tables also give the absolute metric with its
seeds' spread beside the trivial one. VFLAIR's defence capability score, with AP* = 0 and MP* = 1:
DCS = 1 / (1 + sqrt((1 − β) AP² + β (1 − MP)²)), β = 0.5, per secret; and on VFLAIR's own scale (the raw label
attack accuracy, the absolute MP, d_MP = max(MP₀ − MP, 0)). The picture (``--png``, or docs/figures through
benchmarks/figures.py) draws the absolute test metric against AP per data set, a panel for each secret.
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
# (the guarantee needs bounds no one reads from the data; a user states their own): label DP clips the target to it,
# round DP starts from its midpoint (F0 = 200); the classification data sets use neither
BOUNDS = {"gal.label_bounds": [0.0, 400.0]}
# VFLAIR's breast cancer split (src/configs/basic_configs_breast.json): two parties of 15 columns, a two-layer MLP
# bottom model each, 30 epochs, one batch of 2048 (every training row); Interm averages the bottom models' hidden
# layers under Alice's last layer where VFLAIR sums their logits
VFLAIR_SPLIT = {"data.organizations": 2, "learner.model": ["mlp"], "learner.epochs": 30, "learner.batch_size": 2048}
CELLS = [  # (method, defence, its options, data sets)
    ("gal", "none", {}, DATASETS),
    ("gal", "label DP ε=8", {"gal.privacy": "dp", "gal.privacy_epsilon": 8.0, **BOUNDS}, DATASETS),
    ("gal", "label DP ε=2", {"gal.privacy": "dp", "gal.privacy_epsilon": 2.0, **BOUNDS}, DATASETS),
    ("gal", "label DP ε=1", {"gal.privacy": "dp", "gal.privacy_epsilon": 1.0, **BOUNDS}, DATASETS),
    ("gal", "label DP ε=0.5", {"gal.privacy": "dp", "gal.privacy_epsilon": 0.5, **BOUNDS}, DATASETS),
    ("gal", "round DP ε=8", {"gal.privacy": "dp_residuals", "gal.privacy_epsilon": 8.0, **BOUNDS}, DATASETS),
    ("gal", "round DP ε=2", {"gal.privacy": "dp_residuals", "gal.privacy_epsilon": 2.0, **BOUNDS}, DATASETS),
    ("gal", "round DP ε=1", {"gal.privacy": "dp_residuals", "gal.privacy_epsilon": 1.0, **BOUNDS}, DATASETS),
    ("gal", "round DP ε=0.5", {"gal.privacy": "dp_residuals", "gal.privacy_epsilon": 0.5, **BOUNDS}, DATASETS),
    ("gal", "residual α=10", {"gal.privacy": "residual_laplace", "gal.privacy_alpha": 10.0}, DATASETS),
    ("gal", "residual α=1", {"gal.privacy": "residual_laplace", "gal.privacy_alpha": 1.0}, DATASETS),
    ("gal", "residual α=0.1", {"gal.privacy": "residual_laplace", "gal.privacy_alpha": 0.1}, DATASETS),
    ("gal", "ip", {"gal.privacy": "ip"}, DATASETS),
    ("gal", "noisy σ=5", {"gal.noisy_organizations": ["half"], "gal.noise_sigma": 5.0}, DATASETS),
    # model completion where the organizations' outputs are not linear in their columns (Fu et al.'s passive attack)
    ("gal", "none, MLP organizations", {"learner.model": ["mlp"]}, DATASETS),
    ("gal", "none, GB organizations", {"learner.model": ["gb"]}, DATASETS),
    ("ascii", "none", {"data.organizations": 2, "learner.model": ["tree"], "learner.max_depth": 2}, CLASSIFICATION),
    ("interm", "none", VFLAIR_SPLIT, ["breast_cancer"]),
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
    keep = ("attacks", "counted", "exposure", "budget", "not_attacked", "known_rows", "kept_rows")
    return {**{k: p[k] for k in keep if k in p}, "trivial": p["main_task"].get("trivial")}


LABELS = (
    "label reading",
    "label inference",
    "label inference (rounds summed)",
    "model completion",
    "residual recovery",
)  # attacks on Alice's labels (and residuals), as records made before `secret` name them
TARGETS = {"labels": "labels", "features": "features"}  # the secrets the tables and pictures count


def secret_of(a: dict) -> str:
    """What an attack goes after: its record's ``secret`` (residuals count with the labels they carry)."""
    s = a.get("secret") or ("labels" if a["attack"] in LABELS else "features")
    return "labels" if s == "residuals" else s


def share_of(a: dict) -> float:
    """An attack's share of the way from the better of its two baselines (the trivial one and the attacker's own data
    alone) to a perfect attack (vcl.audit.attacks.Score.share; computed for records made before it was kept)."""
    if "share" in a:
        return a["share"]
    own = a.get("own", a.get("beside", {}).get("own_columns_alone"))
    accuracy = a["metric"] == "accuracy"
    floor = a["baseline"] if own is None else (max if accuracy else min)(a["baseline"], own)
    if accuracy:
        return (a["score"] - floor) / (1.0 - floor) if floor < 1 else 0.0
    return (floor - a["score"]) / floor if floor > 0 else 0.0


def pairs_of(run: dict) -> list[dict]:
    """The counted pairs of one run: the strongest attack per receiver, target, secret and known rows (the record's
    ``counted``, or for records made before it, the strongest attack of each pair, all at their 40 known rows)."""
    if run.get("counted"):
        return [{**p, "secret": secret_of(p)} for p in run["counted"]]
    best = {}
    for a in run["attacks"]:
        key = (a["receiver"], a["target"], secret_of(a))
        if key not in best or share_of(a) > share_of(best[key]):
            best[key] = a
    return [{**a, "secret": k[2], "known": 40, "share": share_of(a)} for k, a in best.items()]


def ap_of(run: dict, secret: str, known: int | None = None, worst: bool = False) -> float | None:
    """One run's AP on ``secret`` at ``known`` rows (None: the most it tried): the mean over its receiver-target pairs
    of the strongest attack's share, or with ``worst`` the most exposed pair's; clipped to [0, 1]."""
    pairs = [p for p in pairs_of(run) if p["secret"] == secret]
    if not pairs:
        return None
    known = max(p["known"] for p in pairs) if known is None else known
    shares = [p["share"] for p in pairs if p["known"] == known]
    if not shares:
        return None
    return min(1.0, max(0.0, max(shares) if worst else statistics.mean(shares)))


def main_power(record: dict, undefended: float | None) -> float:
    """MP relative to the same method without defence (1: as good; an error inverted so that lower is worse)."""
    if not undefended:
        return 1.0
    return record["value"] / undefended if record["metric"] == "accuracy" else undefended / record["value"]


def dcs(ap: float, mp: float, beta: float = BETA) -> float:
    return 1.0 / (1.0 + math.sqrt((1 - beta) * ap**2 + beta * (1 - mp) ** 2))


def vflair(rs: list[dict], undefended: float | None) -> dict | None:
    """VFLAIR's own scale for the attacks on the labels (Zou et al., ICLR 2024): the raw attack accuracy (the counted
    pairs' mean at the most known rows), AP* = 0, the absolute main-task accuracy, d_MP = max(MP₀ − MP, 0), and its
    DCS = 1 / (1 + sqrt((1 − β) AP² + β d_MP²)). Classification only (its label attacks score accuracy)."""
    if rs[0]["metric"] != "accuracy":
        return None
    raw = []
    for r in rs:
        pairs = [p for p in pairs_of(r) if p["secret"] == "labels" and p["metric"] == "accuracy"]
        if pairs:
            top = max(p["known"] for p in pairs)
            raw.append(statistics.mean(p["score"] for p in pairs if p["known"] == top))
    if not raw:
        return None
    ap, mp = statistics.mean(raw), statistics.mean(r["value"] for r in rs)
    d_mp = max((undefended or mp) - mp, 0.0)
    return {"raw_attack": ap, "d_mp": d_mp, "dcs": 1.0 / (1.0 + math.sqrt((1 - BETA) * ap**2 + BETA * d_mp**2))}


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.mean(values) if values else None


def _spread(values: list) -> float:
    values = [v for v in values if v is not None]
    return statistics.stdev(values) if len(values) > 1 else 0.0


def summary_rows(records: list[dict]) -> list[dict]:
    """One row per (dataset, method, defence), over its seeds: the absolute test metric and its spread beside the
    trivial one, MP, ε, each attack kind's AP (mean share over receivers, at the most known rows), and per secret the
    counted AP (the strongest attack per pair) at each count of known rows, its worst pair and spread, and DCS on our
    scale and VFLAIR's."""
    groups = defaultdict(list)
    for r in records:
        groups[(r["dataset"], r["method"], r["defence"])].append(r)
    undefended = {(ds, m): statistics.mean(r["value"] for r in rs) for (ds, m, d), rs in groups.items() if d == "none"}
    rows = []
    for (ds, method, defence), rs in groups.items():
        kinds = sorted({a["attack"] for r in rs for a in r["attacks"]})
        top = {r["seed"]: max((p["known"] for p in pairs_of(r)), default=0) for r in rs}
        power = {k: _mean([_mean([share_of(a) for a in r["attacks"] if a["attack"] == k and a.get("known", 40) in
                                  (0, top[r["seed"]])]) for r in rs]) for k in kinds}  # fmt: skip
        mp = statistics.mean(main_power(r, undefended.get((ds, method))) for r in rs)
        knowns = sorted({p["known"] for r in rs for p in pairs_of(r)})
        sweep = {t: {k: _mean([ap_of(r, t, k) for r in rs]) for k in knowns} for t in TARGETS}
        strongest = {t: _mean([ap_of(r, t) for r in rs]) for t in TARGETS}
        eps = [b["epsilon"] for r in rs for b in r["budget"] if b.get("private")]
        rows.append({"dataset": ds, "method": method, "defence": defence, "metric": rs[0]["metric"],
                     "value": statistics.mean(r["value"] for r in rs),
                     "value_spread": _spread([r["value"] for r in rs]),
                     "trivial": _mean([r.get("trivial") for r in rs]), "mp": mp, "ap": power,
                     "strongest": strongest,
                     "strongest_spread": {t: _spread([ap_of(r, t) for r in rs]) for t in TARGETS},
                     "worst_receiver": {t: _mean([ap_of(r, t, worst=True) for r in rs]) for t in TARGETS},
                     "by_known": sweep, "dcs": {t: None if ap is None else dcs(ap, mp) for t, ap in strongest.items()},
                     "vflair": vflair(rs, undefended.get((ds, method))),
                     "epsilon": max(eps) if eps else None, "seeds": len(rs)})  # fmt: skip
    return rows


def _cell(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}".replace("-", "−")  # a minus the docs quote


def report(records: list[dict]) -> str:
    rows = summary_rows(records)
    out = []
    for ds in DATASETS:
        mine = [r for r in rows if r["dataset"] == ds]
        if not mine:
            continue
        knowns = sorted({k for r in mine for t in TARGETS for k in r["by_known"][t]})
        sweep = " | ".join(f"{t} AP at {k} known" for t in TARGETS for k in knowns)
        out += [f"**{ds}** (mean over {mine[0]['seeds']} seed(s), ± the seeds' standard deviation; AP: the strongest "
                "attack on each receiver-target pair, its share of the way from the better of the trivial baseline "
                "and the attacker's own data alone to a perfect attack, mean over the pairs; worst: the most exposed "
                "pair)", "",
                "| method | defence | test metric | trivial | MP | ε (δ = 1e-5) | AP labels (worst) | AP features "
                f"(worst) | {sweep} | DCS labels | DCS features | VFLAIR: raw label attack | d_MP | DCS |",
                "|---|---|---|---|---|---|---|---|" + "---|" * (len(knowns) * len(TARGETS)) + "---|" * 5]  # fmt: skip
        for r in mine:
            counted = " | ".join("—" if r["strongest"][t] is None else
                                 f"{r['strongest'][t]:.2f} ± {r['strongest_spread'][t]:.2f} "
                                 f"({r['worst_receiver'][t]:.2f})" for t in TARGETS)  # fmt: skip
            by_known = " | ".join(_cell(r["by_known"][t].get(k)) for t in TARGETS for k in knowns)
            v = r["vflair"] or {}
            out.append(f"| {r['method']} | {r['defence']} | {r['value']:.4g} ± {r['value_spread']:.3f} | "
                       f"{_cell(r['trivial'], 3)} | {r['mp']:.3f} | {_cell(r['epsilon'], 3)} | {counted} | "
                       f"{by_known} | {_cell(r['dcs']['labels'], 3)} | {_cell(r['dcs']['features'], 3)} | "
                       f"{_cell(v.get('raw_attack'), 3)} | {_cell(v.get('d_mp'), 3)} | "
                       f"{_cell(v.get('dcs'), 3)} |")  # fmt: skip
        kinds = sorted({k for r in mine for k in r["ap"]})
        out += ["", "Each attack kind's AP (mean share over its receivers, at the most known rows):", "",
                "| method | defence | " + " | ".join(kinds) + " |", "|---|---|" + "---|" * len(kinds)]  # fmt: skip
        for r in mine:
            out.append(f"| {r['method']} | {r['defence']} | " + " | ".join(_cell(r["ap"].get(k)) for k in kinds) + " |")
        out.append("")
    return "\n".join(out)


MARKERS = {"gal": "o", "ascii": "s", "dc_smote": "^", "dc_rand": "v", "dc_tsvd": "<", "mpdl": "D", "interm": "P"}


NAMES = {"gal": "GAL", "ascii": "ASCII", "dc_smote": "DC(SMOTE)", "dc_rand": "DC(rand)", "dc_tsvd": "DC(TSVD)",
         "mpdl": "MPDL", "interm": "Interm"}  # the papers' names in the pictures' legends  # fmt: skip


def draw(records: list[dict], path: Path, dpi: int, dataset: str) -> None:
    """The absolute test metric against AP for every method and defence on ``dataset``, one panel for the attacks on
    Alice's labels and one for those on the organizations' features: each point the strongest attack on each pair
    (AP: mean over the pairs and seeds, bars: the seeds' spread of both), ε beside it where one is a guarantee, the
    trivial figure as a dashed line; the top left is private and accurate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in summary_rows(records) if r["dataset"] == dataset]
    fig, axes = plt.subplots(1, 2, figsize=(13, 6.4), sharey=True)
    for ax, target in zip(axes, TARGETS, strict=True):
        notes = []  # (x, y, label): set apart below, so that no two overprint
        for method in dict.fromkeys(r["method"] for r in rows):
            mine = [r for r in rows if r["method"] == method and r["strongest"][target] is not None]
            if not mine:
                continue
            ax.errorbar([r["strongest"][target] for r in mine], [r["value"] for r in mine],
                        xerr=[r["strongest_spread"][target] for r in mine], yerr=[r["value_spread"] for r in mine],
                        fmt=MARKERS.get(method, "o"), ms=6, capsize=2, label=NAMES.get(method, method))  # fmt: skip
            for r in mine:
                eps = r["epsilon"] is not None and "ε" not in r["defence"]
                label = f"{NAMES.get(method, method)} {r['defence']}" + (f" (ε {r['epsilon']:.2g})" if eps else "")
                notes.append((r["strongest"][target], r["value"], label))
        low, high = ax.get_ylim()
        gap = 0.032 * (high - low)
        for bucket in sorted({round(x, 1) for x, _, _ in notes}):
            column = sorted((n for n in notes if round(n[0], 1) == bucket), key=lambda n: -n[1])
            last = math.inf
            for x, y, label in column:
                at = min(y, last - gap)
                last = at
                ax.annotate(label, (x, y), xytext=(x + 0.03, at), fontsize=6, va="center",
                            arrowprops={"arrowstyle": "-", "lw": 0.3, "color": "grey"})  # fmt: skip
        trivial = [r["trivial"] for r in rows if r["trivial"] is not None]
        if trivial:
            ax.axhline(statistics.mean(trivial), ls="--", lw=0.8, color="grey")
            ax.annotate("trivial (majority / mean guess)", (0.0, statistics.mean(trivial)), fontsize=7,
                        color="grey", xytext=(2, 2), textcoords="offset points")  # fmt: skip
        ax.set_xlim(-0.05, 1.45)
        ax.set_xlabel(f"AP on the {target}: strongest attack per pair, share of the way to perfect (0: learns nothing)",
                      fontsize=8)  # fmt: skip
        ax.set_title(f"attacks on {'Alice’s labels' if target == 'labels' else 'the organizations’ features'}",
                     fontsize=10)  # fmt: skip
        ax.grid(alpha=0.3)
    metric = rows[0]["metric"] if rows else "metric"
    axes[0].set_ylabel(f"test {metric} (absolute; bars: the seeds' spread)")
    handles = {}  # every method's entry, from whichever panel drew it
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    axes[1].legend(handles.values(), handles.keys(), fontsize=8, loc="lower left")
    seeds = max((r["seeds"] for r in rows), default=0)
    fig.suptitle(f"{dataset}: main task against attack, {seeds} seed(s) (benchmarks/privacy.py)", fontsize=10)
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
                model = options_.get("learner.model", ["linear"])[0]
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
