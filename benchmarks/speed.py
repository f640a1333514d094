"""Whole-process time of vcl's default job, beside ``python -c "import torch"``, ``python -c "import torch,
pytorch_lightning"`` and, given a checkout of the GAL authors' code, beside their ``train_model_assist.py`` on the
same job.

    python benchmarks/speed.py --out runs/bench/speed.json
    python benchmarks/speed.py --reference PATH --out runs/bench/speed.json   # PATH: a checkout of
        # diaoenmao/GAL-Gradient-Assisted-Learning-for-Decentralized-Multi-Organization-Collaborations

Each command runs as its own process, once to warm the file caches (not counted), then ``--repeats`` times,
the commands taking turns so that a change in the machine's load falls on all of them alike:

- ``import_torch``: ``python -c "import torch"``, the floor of any torch program;
- ``import_lightning``: ``python -c "import torch, pytorch_lightning"``, the floor of any Lightning program
  (vcl's learners are LightningModules, its data modules LightningDataModules: every run imports Lightning);
- ``import_sklearn``: ``python -c "import torch, pytorch_lightning, sklearn.tree, sklearn.linear_model,
  sklearn.ensemble"``: what importing scikit-learn's estimators adds to Lightning's, which a run that names none
  does not pay (vcl imports them where a run uses one);
- ``party_import``: ``python -c "import vcl.party.server"``, what ``python -m vcl.party`` imports before it reads its
  config and can listen (no torch: torch and Lightning come with the first Setup, or before listening with
  ``preload``);
- ``vcl_default``: ``train.py`` with its defaults (GAL on wine, M = 8 Linear organizations, 10 rounds, Alone
  beside it), the README's first command, writing into a temporary directory removed afterwards;
- ``vcl_gal``: the same job without the comparison run, the job the authors' script runs;
- ``vcl_default_no_audit``: the default job without the audit of what its receivers kept (``--run.audit false``):
  ``vcl_default`` over it is what the audit costs (the target: at most 1.1×);
- ``authors``: ``src/train_model_assist.py --data_name Wine --model_name linear --control_name
  8_stack_100_10_search_0 --device cpu`` in the checkout (GAL, 8 organizations, Linear, 100 local epochs,
  10 rounds, η by line search), with ``--reference-python`` (its packages: anytree, tabulate, pyyaml beside
  torch). It writes its data and results into the checkout, as it always does. Their script loads the
  files it wrote itself with ``torch.load``; torch ≥ 2.6 refuses such pickles by default, so its process
  runs with ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``.

It prints the medians and the ratios: ``vcl_default / import_lightning`` (the start-up target: at most
1.6×, the price of the card's kind: every learner a LightningModule, every optimizer torch's),
``vcl_default / import_torch`` (for reference) and ``authors / vcl_gal`` (the target: at least 5×).
With ``--out`` it saves a PNG beside the records: each command's runs and median, the ratios in its title.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import write_records

ROOT = Path(__file__).resolve().parents[1]
SKLEARN = "sklearn.tree, sklearn.linear_model, sklearn.ensemble"  # the estimators vcl's learners and DC name
AUTHORS_JOB = [
    "train_model_assist.py",
    "--data_name",
    "Wine",
    "--model_name",
    "linear",
    "--control_name",
    "8_stack_100_10_search_0",
    "--device",
    "cpu",
]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each command (after one warm-up)")
    p.add_argument("--reference", default=None, help="a checkout of the GAL authors' code (its src/ is run)")
    p.add_argument("--reference-python", default=sys.executable, help="the Python that runs the authors' code")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats {args.repeats}: give at least 1.")
    if args.reference and not (Path(args.reference) / "src" / AUTHORS_JOB[0]).is_file():
        p.error(f"--reference {args.reference}: no src/{AUTHORS_JOB[0]} there; give a checkout of the authors' code.")
    return args


def commands(args, out_dir: str) -> dict[str, tuple[list[str], Path, dict]]:
    """name: (argv, working directory, extra environment)."""
    vcl = [sys.executable, "train.py", "--quiet", "--overwrite", "--run.device", "cpu"]
    cmds = {
        "import_torch": ([sys.executable, "-c", "import torch"], ROOT, {}),
        "import_lightning": ([sys.executable, "-c", "import torch, pytorch_lightning"], ROOT, {}),
        "import_sklearn": ([sys.executable, "-c", f"import torch, pytorch_lightning, {SKLEARN}"], ROOT, {}),
        "party_import": ([sys.executable, "-c", "import vcl.party.server"], ROOT, {}),
        "vcl_default": ([*vcl, "--out", f"{out_dir}/default"], ROOT, {}),
        "vcl_gal": ([*vcl, "--compare", "--out", f"{out_dir}/gal"], ROOT, {}),
        "vcl_default_no_audit": ([*vcl, "--run.audit", "false", "--out", f"{out_dir}/no_audit"], ROOT, {}),
    }
    if args.reference:
        env = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
        cmds["authors"] = ([args.reference_python, *AUTHORS_JOB], Path(args.reference) / "src", env)
    return cmds


def timed(argv: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise SystemExit(f"{' '.join(argv[:3])} … failed (exit {proc.returncode}): {' / '.join(tail)}")
    return seconds


def _runs(records: list[dict]) -> dict[str, list[float]]:
    """Each command's seconds, commands in the order they first appear."""
    runs: dict[str, list[float]] = {}
    for r in records:
        runs.setdefault(r["command"], []).append(r["seconds"])
    return runs


def _ratios(med: dict[str, float]) -> list[tuple[str, float, str, bool]]:
    """(name, value, target, met) of each ratio the medians allow."""
    out = []
    if "vcl_default" in med and "import_lightning" in med:
        ratio = med["vcl_default"] / med["import_lightning"]
        out.append(("vcl_default / import_lightning", ratio, "≤ 1.6×", ratio <= 1.6))
    if "vcl_default" in med and "import_torch" in med:
        out.append(("vcl_default / import_torch", med["vcl_default"] / med["import_torch"], "reference", True))
    if "vcl_default" in med and "vcl_default_no_audit" in med:  # what the audit of what the receivers kept costs
        ratio = med["vcl_default"] / med["vcl_default_no_audit"]
        out.append(("vcl_default / vcl_default_no_audit", ratio, "≤ 1.1×", ratio <= 1.1))
    if "authors" in med and "vcl_gal" in med:
        ratio = med["authors"] / med["vcl_gal"]
        out.append(("authors / vcl_gal", ratio, "≥ 5×", ratio >= 5))
    return out


def report(records: list[dict]) -> str:
    """Medians per command and the two ratios, from the records."""
    med = {k: statistics.median(v) for k, v in _runs(records).items()}
    lines = ["| command | median seconds (whole process) | runs |", "|---|---|---|"]
    for name, seconds in med.items():
        lines.append(f"| {name} | {seconds:.2f} | {sum(r['command'] == name for r in records)} |")
    lines += ["", "| ratio | measured | target |", "|---|---|---|"]
    for name, ratio, target, met in _ratios(med):
        verdict = "" if target == "reference" else f" ({'met' if met else 'not met'})"
        lines.append(f"| {name} | {ratio:.2f}× | {target}{verdict} |")
    return "\n".join(lines)


def plot(records: list[dict], path: Path) -> None:
    """Each command's whole-process seconds: its runs as dots, its median as a bar; the ratios in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = _runs(records)
    med = {k: statistics.median(v) for k, v in runs.items()}
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(runs) + 1.4))
    names = list(runs)[::-1]  # the first command on top
    ax.barh(names, [med[n] for n in names], color="#9ecae1")
    for y, name in enumerate(names):
        ax.plot(runs[name], [y] * len(runs[name]), "k.", markersize=5)
        ax.annotate(f"{med[name]:.2f} s", (max(runs[name]), y), xytext=(6, 0), textcoords="offset points", va="center")
    ax.set_xlabel("seconds, whole process (bar: median; dots: runs)")
    ax.set_xlim(0, 1.15 * max(max(v) for v in runs.values()))
    ratios = [f"{name} {ratio:.2f}× (target {target})" for name, ratio, target, _ in _ratios(med)]
    ax.set_title("; ".join(ratios), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"saved {path}")


def main(argv=None) -> None:
    args = parse_args(argv)
    records = []
    with tempfile.TemporaryDirectory(prefix="vcl_speed_") as out_dir:
        cmds = commands(args, out_dir)
        for argv_, cwd, env in cmds.values():
            timed(argv_, cwd, env)  # warm-up: file caches, compiled bytecode, the authors' processed data
        for repeat in range(args.repeats):
            for name, (argv_, cwd, env) in cmds.items():
                seconds = timed(argv_, cwd, env)
                records.append({"benchmark": "speed", "command": name, "repeat": repeat, "seconds": seconds})
                print(f"{name} run {repeat + 1}: {seconds:.2f} s", flush=True)
    write_records(records, args.out)
    print(report(records))
    if args.out:
        plot(records, Path(args.out).with_suffix(".png"))


if __name__ == "__main__":
    main()
