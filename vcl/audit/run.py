"""``train.py audit --out RUN``: the attacks that apply to a finished run's method, on what its receivers kept
(:class:`KeptRun`), chosen by its family's :attr:`vcl.family.Family.auditor`; :func:`audit` writes results.json's
``privacy`` section (docs/privacy.md)."""

from __future__ import annotations

import functools
import importlib
import json
from pathlib import Path

import numpy as np

from vcl.audit.attacks import SWEEP, Score, counted, exposure
from vcl.config import RunConfig
from vcl.coordinator.assembly import datamodule_for
from vcl.coordinator.rundir import CHECKPOINT, KEPT, PARTIES, RESULTS, atomic_write_json
from vcl.errors import VCLInputError
from vcl.family import family_of
from vcl.storage.checkpoints import load_checkpoint
from vcl.storage.kept import kept_rounds, read_kept, sampled

COORDINATOR = "coordinator"  # the holder whose messages are <run>/messages/: Alice's coordinator (DC: the analyst)


class KeptRun:
    """A finished run as the audit reads it: its results and config, the messages each holder kept, Alice's
    checkpoint and the run's data. ``results``: its results.json (or the results a run is about to write); ``data``:
    the run's data where the caller holds it already."""

    def __init__(self, out: Path, results: dict | None = None, data=None, known: int | tuple = SWEEP, config=None):
        self.out = Path(out)
        if results is None:
            path = self.out / RESULTS
            if not path.is_file():
                raise VCLInputError(f"--out {self.out} holds no results.json; audit a finished run's directory.")
            results = load_json(path)
        self.results, self._data = results, data
        self.sweep = tuple(k for k in ((known,) if isinstance(known, int) else known) if k > 0)  # the learned attacks'
        self.known = max(self.sweep, default=0)  # known rows: each count of the sweep; 0 runs those that need none
        self._cut, self.sampled = None, False  # the data at the kept rows (data()), and whether rows were cut
        self.config = config if config is not None else RunConfig.from_dict(results["config"])
        self.method = results["method"]
        self.names: list[str] = list(results.get("organizations") or [p["name"] for p in results.get("parties", [])])
        self.seed = self.config.run.seed
        self.last = results["rounds"][-1]["round"] if results.get("rounds") else None
        if not kept_rounds(self.out / KEPT):
            raise VCLInputError(
                f"{self.out} kept no messages (it ran with run.keep_messages false, or before vcl kept them), so there "
                "is nothing to attack; run it again with run.keep_messages true."
            )

    def messages(self, holder: str) -> list:
        """(round, direction, message) of every message ``holder`` kept (:data:`COORDINATOR` or a party's name); []
        where the holder's files are not here (a party on its own machine keeps its own)."""
        return self._messages(holder)

    @functools.cache  # noqa: B019 (one KeptRun per audit)
    def _messages(self, holder: str) -> list:
        return read_kept(self.folder(holder), self.last)

    def folder(self, holder: str) -> Path:
        if holder == COORDINATOR:
            return self.out / KEPT
        dirs = list(self.config.transport.party_dirs or [])
        index = self.names.index(holder) if holder in self.names else -1
        own = dirs[index] if 0 <= index < len(dirs) and dirs[index] else None
        return (Path(own) if own else self.out / PARTIES) / holder / KEPT  # transport.party_dirs: its root here

    def received(self, holder: str, kinds: tuple[type, ...], direction: str = "in") -> list:
        """The messages of ``kinds`` that ``holder`` kept in ``direction``, in the order it kept them."""
        return [m for _, d, m in self.messages(holder) if d == direction and isinstance(m, kinds)]

    def data(self):
        """The run's data as its config builds it (what the attacks are scored against), cut to the rows its holders
        kept (``run.keep_rows``: :func:`vcl.storage.kept.sampled`); :attr:`sampled` says whether rows were cut."""
        if self._data is None or not getattr(self._data, "views", None):
            dm = datamodule_for(self.config)
            dm.setup()
            self._data = dm.data
        if self._cut is None:
            self._cut = sampled(self._data, self.config.run.keep_rows)
            self.sampled = self._cut is not self._data
        return self._cut

    def checkpoint(self) -> dict:
        """Alice's last checkpoint (her side of the run: her noise's secret, say)."""
        return load_checkpoint(self.out / CHECKPOINT)

    @property
    def main_task(self) -> dict:
        return {"metric": self.results["metric"], "value": self.results["value"]}


def load_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise VCLInputError(
            f"{path} is not a results.json vcl wrote ({err}); audit a finished run's directory."
        ) from None
    if not isinstance(value, dict) or not {"config", "method", "rounds"} <= set(value):
        raise VCLInputError(f"{path} is not a results.json vcl wrote; audit a finished run's directory.")
    return value


def privacy_section(run: KeptRun) -> dict:
    """What the run's family finds on what its receivers kept: each attack's score beside its baseline, each noise's
    budget, the main task's metric."""
    family = family_of(run.config, run.method)
    if not family.auditor:
        raise VCLInputError(f"method {run.method}'s family names no auditor (Family.auditor); nothing to audit.")
    found = importlib.import_module(family.auditor).audit(run)  # the family's own code, as its class is
    attacks: list[Score] = found.get("attacks", [])
    pairs = counted(attacks, run.sweep)
    return {
        "attacks": [a.as_dict() for a in attacks],
        "counted": pairs,  # the strongest attack on each receiver-target pair, at each count of known rows
        "exposure": exposure(pairs),  # per secret: the mean over the pairs and the worst
        "budget": found.get("budget", []),
        "not_attacked": found.get("not_attacked", []),
        "main_task": {**run.main_task, "trivial": trivial_task(run.data(), run.main_task["metric"])},
        "known_rows": list(run.sweep),
        "training_rows": training_rows(run.data()),  # what the known rows are a share of (the rows scored on)
        "kept_rows": run.config.run.keep_rows if run.sampled else "all",
        **{k: v for k, v in found.items() if k not in ("attacks", "budget", "not_attacked")},
    }


def training_rows(data) -> int | None:
    """The training rows the attacks are scored on (those the holders kept), where the data name them."""
    labels = getattr(data, "labels", None)
    return len(labels["train"]) if isinstance(labels, dict) and "train" in labels else None


def trivial_task(data, metric: str) -> float | None:
    """The main task's trivial figure on the test rows: the majority rate, or the error of guessing the mean (None
    where the data hold no test labels the audit can read)."""
    labels = getattr(data, "labels", None)
    y = labels.get("test") if isinstance(labels, dict) else getattr(data, "test_labels", None)
    if y is None or not len(y):
        return None
    y = np.asarray(y).reshape(-1)
    if metric == "accuracy":
        return float(np.bincount(y.astype(np.int64)).max() / len(y))
    return float(np.abs(y - y.mean()).mean())


def audited(out: Path, results: dict, config: RunConfig, data=None) -> dict:
    """The privacy section of the run in ``out`` about to write ``results`` (``data``: the run's, where the caller
    holds all of it), or ``{"error": ...}`` where it kept too little to attack."""
    try:
        return privacy_section(KeptRun(out, results, data, config=config))
    except VCLInputError as err:
        return {"error": str(err)}


def audit(out: Path, write: bool = True, known: int | tuple = SWEEP) -> dict:
    """``train.py audit``: the privacy section of the run in ``out``, written into its results.json."""
    run = KeptRun(out, known=known)
    section = privacy_section(run)
    if write:
        atomic_write_json({**run.results, "privacy": section}, run.out / RESULTS)
    return section


def strongest(section: dict) -> list[str]:
    """The closing lines: per secret, the worst receiver-target pair's strongest attack at the most known rows (and
    at none), beside both baselines and the mean over the pairs; then each budget."""
    lines = []
    top = {}
    for e in section.get("exposure", []):
        if e["known"] == 0 or e["known"] >= top.get(e["secret"], {}).get("known", 0):
            top[e["secret"]] = e
    shown = [e for e in section.get("exposure", []) if e["known"] == 0 or e is top.get(e["secret"])]
    for e in shown:
        [a] = [p for p in section["counted"] if (p["receiver"], p["target"], p["secret"], p["known"]) ==
               (e["worst_receiver"], e["worst_target"], e["secret"], e["known"])]  # fmt: skip
        own = "" if a.get("own") is None else f"; its own data alone {a['own']:.3f}"
        rows = f" of {section['training_rows']:,}" if section.get("training_rows") else ""
        lines.append(f"privacy of the {e['secret']} ({e['known']} known rows{rows}): worst {a['attack']} by "
                     f"{a['receiver']} of {a['target']}: {a['metric']} {a['score']:.3f} (baseline "
                     f"{a['baseline']:.3f}{own}); share {e['worst']:.2f}, mean over {e['pairs']} pairs "
                     f"{e['mean']:.2f}")  # fmt: skip
    for b in section.get("budget", []):
        eps = f"ε = {b['epsilon']:.3g} at δ = {b['delta']:g}" if b.get("private") else f"no DP guarantee ({b['why']})"
        lines.append(f"privacy budget of {b.get('mechanism') or 'its noise'}: {eps}")
    return lines
