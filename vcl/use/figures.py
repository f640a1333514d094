"""A finished run's own curves as one picture, the panels the docs draw for the papers' figures.

    python train.py figures --out runs/x                 # writes runs/x/figures/rounds.png
    python train.py figures --out runs/x --png a.png     # or there (a new file, or one this command wrote)

From the run's ``results.json`` alone: nothing is loaded from its checkpoints, no code runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

from vcl.errors import VCLInputError

MARK = b"vcl.use.figures"  # in every PNG this module writes (its Software text chunk): what it may replace


def read_results(out_dir: Path) -> dict:
    """The run's results.json, or a :class:`VCLInputError` that says what to give."""
    path = Path(out_dir) / "results.json"
    if not path.is_file():
        raise VCLInputError(f"--out {out_dir}: no results.json there; give the directory of a finished run.")
    try:
        results = json.loads(path.read_text())
        rounds = results["rounds"]
        assert isinstance(rounds, list) and rounds and all("metrics" in r for r in rounds)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise VCLInputError(f"{path}: not the results of a finished vcl run; give the --out of one.") from None
    return results


def _curve(results: dict, key: str) -> list:
    return [r.get(key) for r in results["rounds"]]


def draw_run(out_dir: Path, png: Path | None = None, dpi: int = 110) -> Path:
    """Draw the run of ``out_dir`` into ``png`` (default ``out_dir/figures/rounds.png``); the path written. A file
    already at ``png`` is replaced only if this module wrote it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    results = read_results(out_dir)
    png = Path(png) if png else Path(out_dir) / "figures" / "rounds.png"
    if png.exists() and MARK not in png.read_bytes()[:4096]:
        raise VCLInputError(f"--png {png}: a file this command did not write is there; give a new path.")
    names, metric = results.get("organizations", []), results["metric"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.2))
    (a_metric, a_loss, a_eta), (a_weights, a_bytes, a_seconds) = axes
    runs = {results["method"]: results, **results.get("compare", {})}
    for method, res in runs.items():
        a_metric.plot([r["metrics"].get("test") for r in res["rounds"]], marker=".", label=method)
        a_loss.plot(_curve(res, "train_loss"), marker=".", label=method)
        a_bytes.plot(_curve(res, "bytes_sent"), marker=".", label=method)
    a_metric.set(title=f"test {metric}", xlabel="round")
    a_loss.set(title="Alice's training loss", xlabel="round")
    a_bytes.set(title="bytes sent per round", xlabel="round")
    rounds = results["rounds"][1:]
    etas = [r.get("eta") for r in rounds]
    if any(e is not None for e in etas):
        steps = [e if isinstance(e, list) else [e] for e in etas]
        for i in range(max(len(s) for s in steps)):
            a_eta.plot(range(1, len(steps) + 1), [s[i] if i < len(s) else None for s in steps], marker=".",
                       label="η" if len(steps[0]) == 1 else f"η, step {i + 1}")  # fmt: skip
        a_eta.set(title="assisted learning rate η", xlabel="round")
    else:
        a_eta.set_axis_off()
    key = "weights" if any("weights" in r for r in rounds) else "alphas"
    per_org = [r.get(key) for r in rounds]
    if any(per_org):
        for m, name in enumerate(names):
            a_weights.plot(range(1, len(per_org) + 1), [w[m] if w and m < len(w) else None for w in per_org],
                           marker=".", label=name)  # fmt: skip
        a_weights.set(title="assistance weights" if key == "weights" else "each agent's α", xlabel="round")
    else:
        a_weights.set_axis_off()
    seconds = results.get("round_seconds", [])
    a_seconds.plot(range(1, len(seconds) + 1), seconds, marker=".", label="round (wall)")
    if any("alice_seconds" in r for r in rounds):
        a_seconds.plot(range(1, len(rounds) + 1), [r.get("alice_seconds") for r in rounds], marker=".", label="Alice")
        fits = [r.get("fit_seconds") or [] for r in rounds]
        a_seconds.plot(range(1, len(rounds) + 1), [sum(f) for f in fits], marker=".",
                       label="the organizations' fits, summed")  # fmt: skip
    a_seconds.set(title="seconds per round", xlabel="round")
    for ax in axes.flat:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if ax.has_data():
            ax.legend(fontsize=7)
    fig.suptitle(f"{results['method']} on {results.get('dataset', '')}: {Path(out_dir).name}")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    tmp = png.with_name(f".{png.name}.{os.getpid()}.tmp")
    try:
        fig.savefig(tmp, dpi=dpi, format="png", metadata={"Software": MARK.decode()})
        tmp.replace(png)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return png
