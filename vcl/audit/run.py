"""``train.py audit --out RUN``: the attacks that apply to a finished run's method, on what its receivers kept.

:class:`KeptRun` is what the audit reads of a run directory — its results and config, the messages each holder kept
(Alice's coordinator in ``messages/``, each party beside its checkpoints), Alice's checkpoint, and the run's data as
its config builds it, from which the attacks are *scored* (a receiver never reads what it did not hold: each attack
takes only what its receiver kept and its own columns). The run's family says which attacks apply
(:attr:`vcl.family.Family.auditor`); :func:`audit` writes the ``privacy`` section of results.json.
"""

from __future__ import annotations

import functools
import importlib
import json
from pathlib import Path

from vcl.audit.attacks import KNOWN, Score
from vcl.config import RunConfig
from vcl.coordinator.assembly import datamodule_for
from vcl.coordinator.rundir import CHECKPOINT, KEPT, PARTIES, RESULTS, atomic_write_json
from vcl.errors import VCLInputError
from vcl.family import family_of
from vcl.storage.checkpoints import load_checkpoint
from vcl.storage.kept import kept_rounds, read_kept

COORDINATOR = "coordinator"  # the holder whose messages are <run>/messages/: Alice's coordinator (DC: the analyst)


class KeptRun:
    """A finished run as the audit reads it (the module's docstring). ``results``: its results.json (or the results a
    run is about to write); ``data``: the run's data where the caller holds it already."""

    def __init__(self, out: Path, results: dict | None = None, data=None, known: int = KNOWN, config=None):
        self.out = Path(out)
        if results is None:
            path = self.out / RESULTS
            if not path.is_file():
                raise VCLInputError(f"--out {self.out} holds no results.json; audit a finished run's directory.")
            results = load_json(path)
        self.results, self._data, self.known = results, data, known
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
        """The run's data as its config builds it (what the attacks are scored against)."""
        if self._data is None or not getattr(self._data, "views", None):
            dm = datamodule_for(self.config)
            dm.setup()
            self._data = dm.data
        return self._data

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
    return {
        "attacks": [a.as_dict() for a in attacks],
        "budget": found.get("budget", []),
        "not_attacked": found.get("not_attacked", []),
        "main_task": run.main_task,
        "known_rows": run.known,
        **{k: v for k, v in found.items() if k not in ("attacks", "budget", "not_attacked")},
    }


def audit(out: Path, write: bool = True, known: int = KNOWN) -> dict:
    """``train.py audit``: the privacy section of the run in ``out``, written into its results.json."""
    run = KeptRun(out, known=known)
    section = privacy_section(run)
    if write:
        atomic_write_json({**run.results, "privacy": section}, run.out / RESULTS)
    return section


def strongest(section: dict) -> list[str]:
    """One line per attack: the receiver that did best against its baseline, and each budget."""
    lines, best = [], {}
    for a in section.get("attacks", []):
        if a["attack"] not in best or a["gain"] > best[a["attack"]]["gain"]:
            best[a["attack"]] = a
    for a in best.values():
        beside = "".join(f"; {k.replace('_', ' ')} {v:.3f}" for k, v in a.get("beside", {}).items())
        lines.append(f"privacy: {a['attack']} by {a['receiver']} of {a['target']}: {a['metric']} {a['score']:.3f} "
                     f"(baseline {a['baseline']:.3f}{beside})")  # fmt: skip
    for b in section.get("budget", []):
        eps = f"ε = {b['epsilon']:.3g} at δ = {b['delta']:g}" if b.get("private") else f"no DP guarantee ({b['why']})"
        lines.append(f"privacy budget of {b.get('mechanism') or 'its noise'}: {eps}")
    return lines
