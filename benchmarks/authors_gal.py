#!/usr/bin/env python
"""The GAL authors' own code, run here on the cells where vcl and the paper disagree, with each of their code's
choices that could decide a published figure turned off one at a time.

    python benchmarks/authors_gal.py --reference PATH --out runs/bench/authors_gal.json
    python benchmarks/authors_gal.py --reference PATH --quick
    python benchmarks/authors_gal.py --reference PATH --cells dp --seeds 0 1 --jobs 2

``--reference``: a checkout of diaoenmao/GAL-Gradient-Assisted-Learning-for-Decentralized-Multi-Organization-
Collaborations. Its ``src/`` is copied into a temporary folder per split and variant and run there; the checkout is
not touched. ``--reference-python`` must import torch, numpy, scikit-learn and anytree (``pip install anytree``).
Each run is their ``train_model_assist.py --data_name D --model_name linear --control_name C --init_seed S`` on the
CPU; the record keeps the test accuracy of rounds 0..10 as their script prints it and the line search's η of each
round (a print added beside their line), so ``best_value`` is the paper's figure (the best test accuracy over
rounds) and ``value`` the last round's.

Their train/test split is one unseeded ``np.random.permutation``, drawn when a data set is first processed and then
kept for every seed and experiment. Here numpy's global generator is seeded before anything runs: with the split
seed when the copy processes its data and computes their z-scoring statistics (their ``make_stats.py``), with
1000 × split seed + run seed before each run, so a record repeats from its command. Files their code wrote are
loaded with ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (torch ≥ 2.6 refuses their numpy arrays otherwise).

Variants (exact text replacements in the copy, each checked to apply exactly once):

- ``published``: their code as it is;
- ``fresh_noise``: ``make_data_loader`` passes ``worker_init_fn=np.random.seed(cfg['seed'])``, which *calls* the
  reseed each time a loader is made (every round, before the next broadcast), so from round 2 on the privacy noise
  on the training residual is the same standard draw every round, scaled by that round's (b − a); here ``None``
  (numpy seeded once, at the start), so each round draws new noise, as the paper's mechanism reads;
- ``signed_eta``: the assisted learning rate as the line search gives it, not their ``min(|η|, 300)``;
- ``fresh_noise+signed_eta``: both.

Cells (``--cells``): ``dp`` — blob, M = 2, 4, 8, DP (α = 1) on the residuals (Tables 15, 16, 5), all four
variants; ``l1`` — blob, M = 8, every organization's local loss ℓ1 (Table 4), ``published`` and ``signed_eta``;
``iris`` — iris, M = 2 and 4, plain GAL (Table 1), ``published`` on split seeds 0–4; ``joint`` — iris, one
organization holding every column (Table 1's Joint), ``published`` on split seeds 0–4. ``--quick``: ``dp`` at M = 2,
``published`` and ``fresh_noise+signed_eta``, seeds 0 and 1.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import write_records

SCRIPT = "train_model_assist.py"
ETA_LINE = "                self.assist_rates[iter] = min(abs(model.assist_rate.item()), 300)\n"
ETA_PRINT = "                print('VCL_ETA', iter, model.assist_rate.item(), flush=True)\n"
RESEED = "worker_init_fn=np.random.seed(cfg['seed'])"
VARIANTS = ["published", "fresh_noise", "signed_eta", "fresh_noise+signed_eta"]
DATA_NAMES = {"blob": "Blob", "iris": "Iris"}
# (dataset, M, control name, the paper's figure, its table, variants, split seeds)
CELLS = {
    "dp": [
        ("blob", 2, "2_stack_100_10_search_0_0_none_0_dp-1", 66.3, "15", VARIANTS, [0]),
        ("blob", 4, "4_stack_100_10_search_0_0_none_0_dp-1", 47.5, "16", VARIANTS, [0]),
        ("blob", 8, "8_stack_100_10_search_0_0_none_0_dp-1", 51.3, "5", VARIANTS, [0]),
    ],
    "l1": [("blob", 8, "8_stack_100_10_search_0_0_l1_0_none", 42.5, "4", ["published", "signed_eta"], [0])],
    "iris": [
        ("iris", 2, "2_stack_100_10_search_0_0_none_0_none", 99.2, "1", ["published"], [0, 1, 2, 3, 4]),
        ("iris", 4, "4_stack_100_10_search_0_0_none_0_none", 100.0, "1", ["published"], [0, 1, 2, 3, 4]),
    ],
    "joint": [("iris", 1, "1_none_100_10_search_0_0_none_0_none", 99.2, "1", ["published"], [0, 1, 2, 3, 4])],
}
QUICK = [("blob", 2, "2_stack_100_10_search_0_0_none_0_dp-1", 66.3, "15", ["published", "fresh_noise+signed_eta"], [0])]
TEST_LINE = re.compile(r"Test Epoch: (\d+)\(100%\)\s+Loss: \S+\s+Accuracy: ([-\d.eE+]+|nan)")
ETA = re.compile(r"VCL_ETA (\d+) (\S+)")
PRELUDE = (
    "import numpy, runpy, sys; numpy.random.seed({seed}); sys.argv = {argv!r}; "
    "runpy.run_path({script!r}, run_name='__main__')"
)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reference", required=True, help="a checkout of the GAL authors' code (its src/ is copied, run)")
    p.add_argument("--reference-python", default=sys.executable, help="the Python that runs the authors' code")
    p.add_argument("--cells", nargs="+", default=list(CELLS), choices=list(CELLS), help="which cells to run")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="run seeds (their --init_seed)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once (each one CPU thread)")
    p.add_argument("--quick", action="store_true", help="DP on blob at M = 2, two variants, seeds 0 and 1")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    args = p.parse_args(argv)
    if not (Path(args.reference) / "src" / SCRIPT).is_file():
        p.error(f"--reference {args.reference}: no src/{SCRIPT} there; give a checkout of the GAL authors' code.")
    if args.jobs < 1:
        p.error(f"--jobs {args.jobs}: give at least 1.")
    return args


def patched(text: str, old: str, new: str, where: str) -> str:
    """``text`` with ``old`` replaced by ``new``; refused unless ``old`` occurs exactly once."""
    if text.count(old) != 1:
        raise SystemExit(
            f"{where}: the text to change occurs {text.count(old)} times, not once ({old.strip()[:60]!r}); this "
            "benchmark reads the authors' code at commit b335edc, give --reference a checkout of it."
        )
    return text.replace(old, new)


def changes(variant: str) -> list[tuple[str, str, str]]:
    """(file, old text, new text) of ``variant``; every variant prints the line search's η."""
    parts = set() if variant == "published" else set(variant.split("+"))
    eta = ETA_LINE.replace("min(abs(model.assist_rate.item()), 300)", "model.assist_rate.item()")
    out = [("assist.py", ETA_LINE, (eta if "signed_eta" in parts else ETA_LINE) + ETA_PRINT)]
    if "fresh_noise" in parts:
        out.append(("data.py", RESEED, "worker_init_fn=None"))
    return out


def prepare(reference: Path, variant: str, split_seed: int, data_names: set[str], python: str, root: Path) -> Path:
    """A copy of the authors' ``src/`` with ``variant``'s changes and the η print, its data processed and its
    z-scoring statistics computed with numpy seeded by ``split_seed``."""
    src = root / f"{variant}_split{split_seed}" / "src"
    shutil.copytree(reference / "src", src)
    for name, old, new in changes(variant):
        path = src / name
        path.write_text(patched(path.read_text(), old, new, f"{reference}/src/{name}"))
    stats = src / "make_stats.py"
    listed = re.search(r"data_names = \[[^\]]*\]", stats.read_text())
    if listed is None:
        raise SystemExit(f"{reference}/src/make_stats.py: no data_names list; give a checkout of commit b335edc.")
    stats.write_text(stats.read_text().replace(listed[0], f"data_names = {sorted(data_names)!r}"))
    _run(python, src, "make_stats.py", [], split_seed)
    return src


def _run(python: str, cwd: Path, script: str, argv: list[str], seed: int) -> str:
    code = PRELUDE.format(seed=seed, argv=[script, *argv], script=script)
    env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([python, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " / ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise SystemExit(f"the authors' {script} {' '.join(argv)} failed in {cwd} (exit {proc.returncode}): {tail}")
    return proc.stdout.replace("\r", "\n")


def parse_output(text: str) -> tuple[list[float], list[float]]:
    """(test accuracy of rounds 0..T as fractions, the line search's η of rounds 1..T) from a run's output."""
    accuracy = {int(r): float(a) / 100.0 for r, a in TEST_LINE.findall(text)}
    eta = {int(r): float(e) for r, e in ETA.findall(text)}
    if not accuracy or sorted(accuracy) != list(range(len(accuracy))):
        raise ValueError("no test accuracy for every round in the authors' output")
    return [accuracy[r] for r in sorted(accuracy)], [eta[r] for r in sorted(eta)]


def one_run(python: str, src: Path, cell: tuple, variant: str, split_seed: int, seed: int) -> dict:
    ds, m, control, paper, table, _, _ = cell
    argv = ["--data_name", DATA_NAMES[ds], "--model_name", "linear", "--control_name", control, "--init_seed",
            str(seed), "--num_experiments", "1", "--device", "cpu"]  # fmt: skip
    start = time.perf_counter()
    accuracy, eta = parse_output(_run(python, src, SCRIPT, argv, 1000 * split_seed + seed))
    return {
        "benchmark": "authors_gal",
        "dataset": ds,
        "organizations": m,
        "control": control,
        "table": table,
        "paper": paper,
        "variant": variant,
        "split_seed": split_seed,
        "seed": seed,
        "metric": "accuracy",
        "value": accuracy[-1],
        "best_value": max(accuracy),
        "accuracy": accuracy,
        "eta": eta,
        "seconds": time.perf_counter() - start,
    }


def report(records: list[dict]) -> str:
    """Per cell and variant (and split seed where several): the mean over seeds of the last round's and the best
    round's test accuracy beside the paper's figure, and how many rounds' line searches gave η < 0; a cell run on
    several splits also gets a row over all of them."""
    groups, splits = defaultdict(list), defaultdict(list)
    for r in records:
        groups[(r["dataset"], r["organizations"], r["control"], r["variant"], r["split_seed"])].append(r)
        splits[(r["dataset"], r["organizations"], r["control"], r["variant"])].append(r)
    for (ds, m, control, variant), rs in splits.items():  # several splits: a row for all of them
        if len({r["split_seed"] for r in rs}) > 1:
            groups[(ds, m, control, variant, "all")] = rs
    lines = [
        "| dataset | M | control | variant | split seed | final round, % | best over rounds, % (paper) | "
        "rounds with η < 0 | largest abs(η) before their cap | seeds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (ds, m, control, variant, split), rs in groups.items():
        final = 100 * statistics.mean(r["value"] for r in rs)
        best = 100 * statistics.mean(r["best_value"] for r in rs)
        etas = [e for r in rs for e in r["eta"]]
        negative = sum(e < 0 for e in etas)
        largest = max((abs(e) for e in etas), default=0.0)
        lines.append(
            f"| {ds} | {m} | `{control}` | {variant} | {split} | {final:.1f} | {best:.1f} ({rs[0]['paper']}, "
            f"Table {rs[0]['table']}) | {negative} of {len(etas)} | {largest:.3g} | {len(rs)} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    args = parse_args(argv)
    cells = QUICK if args.quick else [c for name in args.cells for c in CELLS[name]]
    seeds = [0, 1] if args.quick else args.seeds
    reference = Path(args.reference).resolve()
    records = []
    with tempfile.TemporaryDirectory(prefix="vcl_authors_") as tmp:
        copies, needs = {}, defaultdict(set)
        for cell in cells:
            for variant in cell[5]:
                for split in cell[6]:
                    needs[(variant, split)].add(DATA_NAMES[cell[0]])
        for (variant, split), names in needs.items():
            copies[(variant, split)] = prepare(reference, variant, split, names, args.reference_python, Path(tmp))
        jobs = [(cell, v, split, seed) for cell in cells for v in cell[5] for split in cell[6] for seed in seeds]
        with ThreadPoolExecutor(args.jobs) as pool:
            futures = [
                pool.submit(one_run, args.reference_python, copies[(v, s)], c, v, s, seed) for c, v, s, seed in jobs
            ]
            for (cell, variant, split, seed), future in zip(jobs, futures, strict=True):
                record = future.result()
                records.append(record)
                print(f"{cell[0]} M={cell[1]} {variant} split {split} seed {seed}: final {record['value']:.3f}, "
                      f"best {record['best_value']:.3f} ({record['seconds']:.0f} s)", flush=True)  # fmt: skip
                write_records(records, args.out)
    print(report(records))


if __name__ == "__main__":
    main()
