"""One config in, one run out: data → organizations → protocol rounds → results.json (written atomically when the
run completes). ``resume=True`` continues from the checkpoint and ends as an uninterrupted run."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import secrets
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from vcl.audit.run import audited, strongest
from vcl.callbacks import ProgressTable, RoundCallback, RoundCheckpoint, TensorBoardRounds
from vcl.config import RunConfig, identity_differs
from vcl.coordinator.assembly import build_protocol, check_config, coordinator_data, datamodule_for
from vcl.coordinator.digest import DIGEST, DIGEST_VERSION, data_digest
from vcl.coordinator.results import kept_records, prediction_stage
from vcl.coordinator.rundir import KEPT, PARTIES, RunDirectory, atomic_write_json, versions
from vcl.datamodules.tabular import VerticalData
from vcl.datamodules.user import check_vertical
from vcl.engine import memory
from vcl.engine.progress import round_bar
from vcl.errors import OutOfMemory, PartyLost, VCLInputError
from vcl.family import Family, compare_methods, family_of
from vcl.protocol import Protocol, RoundRecord
from vcl.storage.checkpoints import load_checkpoint, pack_ids
from vcl.transport import transport_class


class Run:
    """The state callbacks see: config, protocol, per-round records, and the run directory."""

    def __init__(self, config: RunConfig, protocol: Protocol, out_dir: Path, verbose: bool = True):
        self.config = config
        self.protocol = protocol
        self.out_dir = out_dir
        self.records: list[dict] = []
        self.should_stop = False
        self.round_seconds: list[float] = []  # each round's wall seconds, in order (resumed runs: all rounds)
        self.data_seconds: float | None = None  # this process's reading, aligning and preparing of the data
        self.verbose = verbose
        self.saved_round: int | None = None  # the last round whose checkpoint is on disk
        self.run_id = secrets.token_hex(8)  # this run's own name, in every checkpoint it writes (kept on resume)
        self.data_digest: dict = {}  # the transport and the digest of the data it gave this process (data_digest)
        self.ids: dict | None = None  # dataset=csv: the aligned row IDs (Alice holds them, packed), kept for predict

    @property
    def metric_name(self) -> str:
        return self.protocol.task.metric_name

    def log(self, line: str) -> None:
        if self.verbose:
            print(line, flush=True)

    def record_round(self, record: RoundRecord, rejoined: list[str] | None = None) -> dict:
        """The protocol's record of a round with Alice's metrics, AUROC and the round's bytes: what results.json
        keeps and the callbacks see; ``rejoined``: the parties that came back before it (:meth:`rejoin`)."""
        channel = self.protocol.federation.channel
        metrics = self.protocol.evaluate()
        auroc = self.protocol.auroc(splits=list(metrics))  # a binary task's, beside its accuracy
        record = {
            **record.as_dict(),
            "metrics": metrics,
            **({"auroc": auroc} if auroc else {}),
            **({"rejoined": list(rejoined)} if rejoined else {}),
            "bytes_sent": channel.bytes_by_round().get(record.round, 0),
        }
        self.records.append(record)
        return record

    def rejoin(self) -> list[str]:
        """Under ``run.missing_parties: skip``, before a round: the parties left out that answer again are set up
        and read their own last checkpoint (:meth:`vcl.coordinator.federation.Federation.rejoin`); their names."""
        federation = self.protocol.federation
        if self.config.run.missing_parties != "skip" or not (federation.missing() or federation.returned):
            return []
        back = federation.rejoin(self.stamp)
        for name in back:
            saved = federation.saved.get(name)
            self.log(f"{name} rejoined before round {self.protocol.round + 1}"
                     + (f" from its checkpoint of round {saved}" if saved is not None else ""))  # fmt: skip
        return back

    @property
    def stamp(self) -> str:
        """What binds a party's checkpoint to this run: the run's name and its settings' digest."""
        return run_stamp(self.run_id, self.config)

    def checkpoint(self) -> dict:
        return {
            "run_id": self.run_id,
            "data": self.data_digest,
            "identity": self.config.identity(),
            "protocol": self.protocol.state_dict(),
            "records": self.records,
            "round_seconds": self.round_seconds,
            **({"ids": self.ids} if self.ids is not None else {}),
        }

    def results(self, compare: dict) -> dict:
        """Metrics of the models the run keeps (:mod:`vcl.coordinator.results`), with the prediction stage's."""
        channel = self.protocol.federation.channel
        sent = channel.total_bytes()  # the rounds' messages; the prediction stage's are counted apart
        task, (recs, kept) = self.protocol.task, kept_records(self.protocol, self.records)
        tests = [r["metrics"]["test"] for r in recs]
        best = max(tests) if task.higher_is_better else min(tests)
        if "val" in recs[-1]["metrics"]:
            vals = [r["metrics"]["val"] for r in recs]
            pick = vals.index(max(vals) if task.higher_is_better else min(vals))
            selection = "validation"
        else:
            pick, selection = len(recs) - 1, "final round"
        stage, stage_round = prediction_stage(self.protocol, recs[pick]["round"], kept)
        return {
            "method": self.protocol.name,
            "dataset": self.config.data.dataset,
            "metric": task.metric_name,
            "organizations": self.protocol.federation.members,
            "value": tests[pick],
            "value_round": recs[pick]["round"],
            "value_selection": selection,
            "best_value": best,
            **({"auroc": recs[pick]["auroc"]} if "auroc" in recs[pick] else {}),  # binary tasks: at value_round
            "final": recs[-1]["metrics"],
            "prediction_stage": stage,
            "prediction_stage_round": stage_round,
            "rounds": recs,
            "bytes_sent": sent,
            "prediction_bytes": channel.total_bytes() - sent,
            "seconds": sum(self.round_seconds),
            "round_seconds": list(self.round_seconds),
            **({"data_seconds": self.data_seconds} if self.data_seconds is not None else {}),
            "stored_parameters": self.protocol.stored_parameters(),  # torch parameters kept for prediction
            **self.missing(recs),
            "transport": self.config.transport.kind,
            "parties": self.protocol.federation.where(),  # where each party ran
            "coordinator_pid": os.getpid(),
            "compare": dict(compare),
            "config": self.config.to_dict(),
        }

    def missing(self, records: list[dict]) -> dict:
        """With ``run.missing_parties: skip``: the rounds each organization was left out of, those it rejoined at
        (if any), and those left out of the prediction stage."""
        if self.config.run.missing_parties != "skip":
            return {}
        rounds: dict[str, list[int]] = {}
        back: dict[str, list[int]] = {}
        for record in records:
            for name in record.get("missing", []):
                rounds.setdefault(name, []).append(record["round"])
            for name in record.get("rejoined", []):
                back.setdefault(name, []).append(record["round"])
        rejoined = {"rejoined_rounds": back} if back else {}
        return {"missing_rounds": rounds, **rejoined, "missing_at_prediction": self.protocol.federation.missing()}


def kept_digest(config: RunConfig, data, family: Family) -> dict:
    """What a checkpoint keeps of the data (:func:`data_digest`): transport, algorithm, digest and version; and where
    the parties keep their preparation of CSV files, the task and classes, which ``train.py predict`` reads here."""
    kept = {"transport": config.transport.kind, "hash": DIGEST, "digest": data_digest(data), "version": DIGEST_VERSION}
    if config.data.dataset == "csv" and not config.data.module and family.parties_keep_preparation:
        kept["kept"] = {"task": data.task, "num_classes": data.num_classes, "classes": data.classes}
    return kept


def data_differ(kept: dict, config: RunConfig, data) -> bool:
    """Whether ``data`` differ from those a checkpoint's ``kept`` digest was made from, on the same transport (one
    naming no algorithm or version: BLAKE2b, version 1)."""
    if kept.get("transport") != config.transport.kind:
        return False
    return kept.get("digest") != data_digest(data, kept.get("hash", "blake2b"), kept.get("version", 1))


OUT_OF_MEMORY = ("can't allocate memory", "out of memory")  # torch's words for a failed allocation


def run_stamp(run_id: str, config: RunConfig) -> str:
    """``<run id>/<digest of the settings a resume must share>``, stamped on every party checkpoint."""
    settings = json.dumps(config.identity(), sort_keys=True, default=str)
    return f"{run_id}/{hashlib.sha256(settings.encode()).hexdigest()[:16]}"


def default_callbacks(config: RunConfig, verbose: bool, family: Family | None = None) -> list[RoundCallback]:
    cbs: list[RoundCallback] = [TensorBoardRounds(), RoundCheckpoint()]
    if verbose:
        cbs.insert(0, ProgressTable())
    return cbs + (family or family_of(config)).round_callbacks(config)


def run_rounds(run: Run, callbacks: list[RoundCallback], max_rounds: int) -> None:
    with long_lived_frozen():
        for _ in rounds(run, callbacks, max_rounds):
            pass


@contextmanager
def long_lived_frozen():
    """Inside, the objects that exist on entry are out of the cyclic garbage collector's scans (``gc.freeze``;
    docs/design.md, "Memory during the rounds"). Nothing is frozen if something else froze objects already."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def rounds(run: Run, callbacks: list[RoundCallback], max_rounds: int) -> Iterator[dict]:
    """The run's rounds up to ``max_rounds``, one per ``next``: each is timed (``run.round_seconds``), recorded,
    passed to the callbacks and yielded. Round 0's record (no training) comes first, untimed and not yielded."""
    for cb in callbacks:
        cb.on_run_start(run)
    if not run.records:
        record = run.record_round(run.protocol.record())  # round 0: F⁰
        for cb in callbacks:
            cb.on_round_end(run, record)
    limit = min(max_rounds, run.protocol.max_rounds or max_rounds)
    while run.protocol.round < limit and not run.should_stop and not run.protocol.stopped:
        start = time.perf_counter()
        rejoined = run.rejoin()
        with round_bar(f"round {run.protocol.round + 1}: local training", run.verbose and sys.stdout.isatty()):
            record = run.protocol.run_round()
        run.round_seconds.append(time.perf_counter() - start)
        record = run.record_round(record, rejoined)
        for cb in callbacks:
            cb.on_round_end(run, record)
        if run.protocol.stopped:
            run.log(f"stopped at round {run.protocol.round}: {run.protocol.stopped}")
        yield record


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during the rounds; ``saved_round`` is the last round whose checkpoint is on disk.
    ``completed``: it came after the run had written its results (the run is whole)."""

    def __init__(self, saved_round: int | None, out_dir: Path, completed: bool = False):
        super().__init__(f"interrupted after round {saved_round}")
        self.saved_round, self.out_dir, self.completed = saved_round, out_dir, completed


def train(
    config: RunConfig,
    resume: bool = False,
    verbose: bool = True,
    callbacks: list[RoundCallback] | None = None,
    write: bool = True,
    overwrite: bool = False,
) -> dict:
    """Run ``config`` (and its ``compare`` methods) and return the results written to results.json. ``--out`` is locked
    for the run; a directory already holding files needs ``resume`` or ``overwrite``. ``write=False`` writes no file."""
    done: list[dict] = []  # the results, once they are written
    try:
        return _train(config, resume, verbose, callbacks, write, overwrite, done)
    except KeyboardInterrupt:
        if not done:
            raise
        rounds = done[0]["rounds"]
        raise RunInterrupted(rounds[-1]["round"] if rounds else None, config.run_dir, completed=True) from None


def _train(config, resume, verbose, callbacks, write, overwrite, done: list) -> dict:
    family = check_config(config)  # the config's family, looked up once and handed down
    out_dir = config.run_dir
    here = config.transport.kind == "local" or (config.transport.kind == "ray" and not config.transport.address)
    party_roots = config.transport.party_dirs if here else ()
    rundir = RunDirectory(out_dir, resume=resume, overwrite=overwrite, party_roots=party_roots) if write else None
    if rundir is not None:
        rundir.check()
    with rundir if rundir is not None else nullcontext():
        state = _resume_state(config, out_dir) if resume else None
        try:  # the row alignment and the parties' set-up may find a party unreachable (transport: grpc)
            started = time.perf_counter()
            data = run_data(config, family=family)
            data_seconds = time.perf_counter() - started
            digest = kept_digest(config, data, family) if write else {}
            if state is not None and data_differ(state["data"], config, data):
                raise VCLInputError(
                    f"--resume: the data differ from those the checkpoint in {out_dir} was made with (rows, labels or "
                    "features changed); resume with the original data, or start afresh with --overwrite."
                )
            protocol = build_protocol(config, data, family=family)
            memory.mark("build")
        except PartyLost as err:
            err.saved_round, err.out_dir = (state["protocol"]["round"] if state else None), out_dir
            raise
        run = Run(config, protocol, out_dir, verbose)
        ids = data.ids if isinstance(data, VerticalData) else None  # csv files' aligned IDs
        run.data_digest, run.ids = digest, (pack_ids(ids) if ids is not None else None)
        run.data_seconds = data_seconds
        if callbacks is None:
            callbacks = default_callbacks(config, verbose, family) if write else []
        try:  # the rounds and the kept models' metrics; then the parties go, before a comparison's start
            if rundir is not None:
                rundir.begin()
                messages = out_dir / KEPT if config.run.keep_messages else None  # what each holder saw cross
                protocol.federation.keep_files(out_dir / PARTIES, messages, config.run.keep_rows)  # and its logs
            if state is not None:
                run.run_id = state["run_id"]
                restore(protocol, state, out_dir, config)
                run.records, run.round_seconds = state["records"], state["round_seconds"]
                run.saved_round = protocol.round
                run.log(f"resumed {out_dir} at round {protocol.round}")
            try:
                run_rounds(run, callbacks, config.run.rounds)
                memory.mark("rounds")
                results = run.results({})
                memory.mark("results")
                if write and config.run.audit and config.run.keep_messages:  # what each receiver kept, attacked
                    results["privacy"] = audit_section(config, out_dir, results, data, here)
                    memory.mark("audit")
                for cb in callbacks:
                    cb.on_run_end(run, results)
            finally:
                for cb in callbacks:
                    cb.teardown(run)
        except KeyboardInterrupt:
            raise RunInterrupted(run.saved_round, out_dir) from None
        except PartyLost as err:
            err.saved_round, err.out_dir = run.saved_round, out_dir
            raise
        except (MemoryError, RuntimeError) as err:
            if isinstance(err, MemoryError) or any(words in str(err) for words in OUT_OF_MEMORY):
                raise OutOfMemory(str(err).strip().splitlines()[0][:200] if str(err).strip() else "") from None
            raise
        finally:
            protocol.federation.close()
        for method in compare_methods(config, family):
            if method == config.method:
                continue
            other = Run(config, build_protocol(config, data, method, family), out_dir, verbose=False)
            board = [TensorBoardRounds(fresh=True)] if write else []  # its own TensorBoard run, beside the main
            try:
                run_rounds(other, board, config.run.rounds)
                results["compare"][method] = other.results({})
                for cb in board:
                    cb.on_run_end(other, results["compare"][method])
            finally:
                for cb in board:
                    cb.teardown(other)
                other.protocol.federation.close()
            results["compare"][method].pop("config")
            memory.mark(method)
        results["memory"] = memory.MARKS[:]  # this process's steps since its previous run (vcl.engine.memory)
        results["versions"] = versions()  # what the run ran with (vcl.coordinator.rundir.RECORDED_PACKAGES)
        memory.MARKS.clear()
        if write:
            atomic_write_json(results, out_dir / "results.json")
        done.append(results)
    if verbose or write:
        summary(results)
    return results


def restore(protocol: Protocol, state: dict, out_dir: Path, config: RunConfig) -> None:
    """``protocol`` and its parties as the checkpoint ``state`` of the run in ``out_dir`` left them: each party reads
    its own files where it runs (unless the coordinator's checkpoint holds every party's), then Alice's side."""
    if "organizations" not in state["protocol"]["federation"]:  # each party keeps its own checkpoint
        stamp = run_stamp(state["run_id"], config)
        kept = state["protocol"]["federation"]
        protocol.federation.load(state["protocol"]["round"], stamp, out_dir / PARTIES, kept)
    protocol.load_state_dict(state["protocol"])


def audit_section(config: RunConfig, out_dir: Path, results: dict, data, here: bool) -> dict:
    """The privacy section of a run about to write its results (:mod:`vcl.audit.run`), scored by the experimenter
    where its parties kept their files on this machine (``here``); a run that kept too little to attack says so."""
    if not here:
        return {"error": "the parties keep what they received where they run; audit the run with train.py audit "
                         "where every party's kept messages and data are"}  # fmt: skip
    transport = transport_class(results["transport"])
    held = None if transport.apart else data  # apart: Alice holds her side of the data only, and the task reads all
    try:
        return transport.experiment(config, audited, out_dir, results, config, held)
    except NotImplementedError as err:  # a transport of one's own without an experimenter's place
        return {"error": f"{err}; audit the run with train.py audit where every party's kept messages and data are"}


def run_data(config: RunConfig, ids: list[str] | None = None, family: Family | None = None):
    """What the coordinating process holds of a checked config's data: all of it for the local transport (every
    data error is raised here, before training), Alice's labels and the parties' names for the ray transport.
    ``ids``: the rows aligned already (a run's checkpoint keeps them), where parties run apart."""
    if transport_class(config.transport.kind).apart:
        return coordinator_data(config, ids, family)
    dm = datamodule_for(config, family=family)
    dm.setup()
    if config.data.module:
        check_vertical(dm)
    return dm.data


def _resume_state(config: RunConfig, out_dir: Path) -> dict:
    """The checkpoint to continue from, after checking it belongs to this config and stops no later than it."""
    ckpt_path = out_dir / "checkpoints" / RoundCheckpoint.filename
    if not ckpt_path.is_file():
        raise VCLInputError(
            f"--resume: no checkpoint at {ckpt_path}; start the run without --resume or point --out at it."
        )
    state = load_checkpoint(ckpt_path)
    diff = identity_differs(state["identity"], config.identity())
    if diff:
        raise VCLInputError(
            f"--resume: the checkpoint in {out_dir} was made with other settings ({', '.join(diff) or 'unknown'}); "
            "resume with the same config or use another --out."
        )
    done = state["records"][-1]["round"] if state["records"] else 0
    if config.run.rounds < done:
        raise VCLInputError(
            f"--resume: run.rounds={config.run.rounds} is below the {done} rounds already run in {out_dir}; "
            f"resume with rounds >= {done}."
        )
    return state


def summary(results: dict) -> None:
    name = results["metric"]
    print(
        f"{results['method']} test {name}: {results['value']:.4f} ({results['value_selection']}, round "
        f"{results['value_round']}); best over rounds {results['best_value']:.4f}; "
        f"{results['bytes_sent']} bytes sent; {results['seconds']:.2f} s in rounds"
    )
    for method, other in results["compare"].items():
        print(f"{method:>5} test {name}: {other['value']:.4f}; best over rounds {other['best_value']:.4f}")
    for line in strongest(results.get("privacy", {})):
        print(line)
