"""``train.py predict``: a finished run's kept models score new people.

    python train.py predict --out RUN_DIR --data.csv_files NEW_ALICE.csv NEW_BOB.csv ... --predictions FILE

Each party is built again from its own last checkpoint (models and :class:`vcl.datamodules.prepare.Preparation`)
and reads its own file of new people (split "new"), no training file; docs/usage.md ("Predict for new people")."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from vcl.classpath import named_classes
from vcl.config import RunConfig
from vcl.coordinator.assembly import build_protocol, check_config, kept_data
from vcl.coordinator.federation import party_roots
from vcl.coordinator.rundir import PARTIES
from vcl.coordinator.runner import data_differ, restore, run_data, run_stamp
from vcl.datamodules.tabular import VerticalData
from vcl.errors import VCLInputError
from vcl.storage.checkpoints import load_checkpoint, unpack_ids
from vcl.transport import transport_class


def finished_run(run_dir: Path) -> tuple[dict, RunConfig]:
    """The results and config of the completed run in ``run_dir``; one sentence if there is none."""
    path = run_dir / "results.json"
    if not path.is_file():
        raise VCLInputError(
            f"--out {run_dir} holds no completed run (no results.json); finish it with --resume, or point --out at a "
            "finished run."
        )
    try:
        results = json.loads(path.read_text())
        config = RunConfig.from_dict({**results["config"], "out": str(run_dir)}, source=str(path))
    except (ValueError, KeyError, TypeError):
        raise VCLInputError(f"{path} is not the results of a vcl run; point --out at a run directory.") from None
    return results, config


class Deployed:
    """A finished run opened to score people: its parties built again from their own checkpoints (or as ``--resume``
    builds them), each with its kept models and its rows of new people (split "new"), and Alice's protocol at the round
    the run reported. ``missing_parties``: ``fail`` or ``skip`` (default: the run's)."""

    def __init__(
        self, run_dir, new_files: list[str], missing_parties: str | None = None, allow_classes: tuple[str, ...] = ()
    ):
        run_dir = Path(run_dir)
        self.results, config = finished_run(run_dir)
        outside = sorted(set(named_classes(self.results["config"])) - set(allow_classes))
        if outside:  # importing a module runs it: never because a file says so
            raise VCLInputError(
                f"the run in {run_dir} names class {outside[0]}, which scoring would import because its results.json "
                f"says so; if you trust that code, name it yourself with --allow_classes {outside[0]}."
            )
        csv = config.data.dataset == "csv"
        if csv and len(new_files) != len(config.data.csv_files):
            count = len(config.data.csv_files)
            raise VCLInputError(
                f"the run has {count} organizations, so --data.csv_files needs {count} files of new people, in the "
                f"run's order (Alice's first), not {len(new_files)}."
            )
        if not csv and new_files:
            raise VCLInputError(
                f"the run trained on data.dataset={config.data.dataset}, which has no new people: leave out "
                "--data.csv_files to score its test split."
            )
        config.data.predict_files = [str(f) for f in new_files]
        config.run.missing_parties = missing_parties or config.run.missing_parties
        family = check_config(config)
        state = load_checkpoint(ckpt := run_dir / "checkpoints" / "last.ckpt")
        run = state["data"].get("kept") if csv else None  # the run's task and classes: its parties keep preparations
        if run is not None:  # each party built again from its own checkpoint and its new rows; no training file read
            where = kept_location(run_dir, state, config, self.results["organizations"])
            data = kept_data(config, run, where, family)
        else:  # a run made before parties kept their preparation, or a built-in data set: its data read again
            _training_files_here(config, run_dir)
            ids = unpack_ids(state.get("ids"), ckpt)  # the training rows as the run aligned them
            data = run_data(config, ids, family)
            if data_differ(state["data"], config, _without_new(data)):
                raise VCLInputError(
                    f"the training data differ from those the run in {run_dir} was trained with; each organization "
                    "prepares new rows as it prepared its training rows, so give the run its training files back."
                )
        self.config, self.data, self.split = config, data, "new" if csv else "test"
        self.protocol = protocol = build_protocol(config, data, family=family)
        try:
            restore(protocol, state, run_dir, config)
        except BaseException:
            self.close()
            raise
        if csv:
            protocol.unlabelled["new"] = len(data.new_ids)
        self.ids = data.new_ids if csv else [str(i) for i in range(protocol.rows("test"))]
        self.id_column = config.data.id_column if csv else "row"
        self.classes = (data.classes if isinstance(data, VerticalData) else None) or [
            str(k) for k in range(data.num_classes)
        ]
        reported = self.results["prediction_stage_round"]
        self.upto = protocol.predicts_upto and reported < protocol.round
        self.round = reported if self.upto else protocol.round

    def score(self, rows=None) -> dict:
        """``{"F", "probabilities", "missing"}`` of the rows at these positions of :attr:`ids` (default: all)."""
        kwargs = {"upto": self.round} if self.upto else {}
        if rows is not None:
            kwargs["rows"] = rows
        F = self.protocol.predict(self.split, **kwargs).detach().cpu()
        classify = self.data.task == "classification"
        probabilities = self.protocol.probabilities(F).cpu() if classify else None
        return {"F": F, "probabilities": probabilities, "missing": self.protocol.federation.missing()}

    def close(self) -> None:
        self.protocol.federation.close()


def predict(
    run_dir, new_files: list[str], out: Path, verbose: bool = True, missing_parties: str | None = None,
    allow_classes: tuple[str, ...] = (),
) -> dict:  # fmt: skip
    """Score new people with the run in ``run_dir``; write ``out`` (a CSV, written whole or not at all).
    ``missing_parties``: as :class:`Deployed`; ``allow_classes``: the user's own classes the run names and may import.
    Returns ``{"ids", "F", "probabilities", "classes", "round", "missing"}``."""
    out = Path(out)
    if out.exists() or not out.parent.is_dir():
        why = "exists; give a new path (predict never replaces a file)" if out.exists() else "is in no folder"
        raise VCLInputError(f"--predictions {out} {why}.")
    deployed = Deployed(run_dir, new_files, missing_parties, tuple(allow_classes))
    try:
        scored = deployed.score()
    finally:
        deployed.close()
    scored |= {"ids": deployed.ids, "classes": deployed.classes, "round": deployed.round}
    write_predictions(out, deployed.id_column, scored, deployed.data.task)
    if verbose:
        gone = f", without {', '.join(scored['missing'])} (down)" if scored["missing"] else ""
        print(f"{deployed.config.method}: {len(deployed.ids)} predictions (the models of rounds 1..{deployed.round}"
              f"{gone}) in {out}")  # fmt: skip
    return scored


def add_run_arguments(parser) -> None:
    """The options ``train.py predict`` and ``python -m vcl.use.serve`` share: the run, its people, missing parties."""
    parser.add_argument("--out", required=True, help="the finished run's directory")
    parser.add_argument(
        "--data.csv_files", dest="files", nargs="+", default=[],
        help="each organization's file of people, in the run's order (Alice's first; her label column optional); "
        "leave out for a built-in data set, whose test split is scored",
    )  # fmt: skip
    parser.add_argument(
        "--run.missing_parties", dest="missing", choices=["fail", "skip"],
        help="an organization that is down: fail, or skip (score with those present); default: the run's",
    )  # fmt: skip
    parser.add_argument(
        "--allow_classes", nargs="+", default=[],
        help="class paths of your own (models, data modules) that the run names and you trust to import",
    )  # fmt: skip


def kept_location(run_dir: Path, state: dict, config: RunConfig, names: list[str]) -> dict:
    """Where each party of the finished run in ``run_dir`` finds its own last checkpoint: the run's stamp, each party's
    last saved round, the run's folder of party files and the ``transport.party_dirs`` roots (``names``: in order)."""
    federation = state["protocol"]["federation"]
    saved = federation.get("saved") or dict.fromkeys(names, state["protocol"]["round"])
    roots = party_roots(config, names)
    return {
        "run": run_stamp(state["run_id"], config), "rounds": {str(n): int(r) for n, r in saved.items()},
        "root": str(run_dir / PARTIES), "roots": {n: str(p) for n, p in roots.items()},
    }  # fmt: skip


def _training_files_here(config: RunConfig, run_dir: Path) -> None:
    """One sentence if a training file this process reads is gone, for a run that prepares new rows from them."""
    d = config.data
    if d.dataset != "csv" or d.module:
        return
    here = d.csv_files[:1] if transport_class(config.transport.kind).apart else d.csv_files
    gone = next((f for f in here if not Path(f).exists()), None)
    if gone is not None:
        raise VCLInputError(
            f"the run in {run_dir} was trained before vcl kept each organization's preparation with its models, so "
            f"it prepares new rows from its training files, and {gone} is not there; give the run its training "
            "files back, or train it again."
        )


def _without_new(data):
    """The data as training saw them (what its digest was made of): every view without the split "new"."""

    if not isinstance(data, VerticalData):
        return data
    views = [replace(v, splits={s: x for s, x in v.splits.items() if s != "new"}) for v in data.views]
    return replace(data, views=views, new_ids=None)


def write_predictions(out: Path, id_column: str, scored: dict, task: str) -> None:
    """The predictions file: the ID column, ``prediction`` (class name or number), ``p_<class>`` per class and, when
    organizations were down, ``missing`` (names joined by ``;``); written aside and renamed, so whole or absent."""

    columns = {id_column: pa.array(scored["ids"], pa.string())}
    if task == "classification":
        names = np.asarray(scored["classes"], dtype=object)
        columns["prediction"] = pa.array(names[scored["F"].argmax(1).numpy()].tolist(), pa.string())
        for k, name in enumerate(scored["classes"]):
            columns[f"p_{name}"] = pa.array(scored["probabilities"][:, k].double().numpy())
    else:
        columns["prediction"] = pa.array(scored["F"][:, 0].double().numpy())
    if scored["missing"]:  # the organizations whose models could not score the row (each row: the same here)
        columns["missing"] = pa.array([";".join(scored["missing"])] * len(scored["ids"]), pa.string())
    part = out.with_name(f".{out.name}.{os.getpid()}.part")
    try:
        pacsv.write_csv(pa.table(columns), str(part), pacsv.WriteOptions(quoting_style="needed"))
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)
