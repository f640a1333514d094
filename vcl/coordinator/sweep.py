"""Many runs at once: a benchmark's runs, in this process one after another, or as Ray tasks on a cluster
(docs/transport.md, "Many runs over a cluster"). :func:`run_jobs` returns the records in the jobs' order; an
:class:`Interleaved` job runs several configs a round at a time, in turn, for timings taken side by side."""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch

from vcl.coordinator.assembly import build_protocol, check_config
from vcl.coordinator.rundir import strict_json
from vcl.coordinator.runner import Run, long_lived_frozen, rounds, run_data, train
from vcl.engine.memory import prepare_process
from vcl.family import compare_methods


@dataclass
class Job:
    benchmark: str
    config: object  # vcl.config.RunConfig
    method: str
    model: str
    details: Callable | None = None  # details(results) -> extra keys for the record
    extra: dict = field(default_factory=dict)

    def __call__(self) -> dict:
        return run_record(self.benchmark, self.config, self.method, self.model, self.details, **self.extra)


def run_record(benchmark: str, cfg, method: str, model: str, details=None, **extra) -> dict:
    """Run one config and return its record. With ``run.audit`` the run writes its files in a temporary folder,
    removed after it, so that what its receivers kept is attacked (:mod:`vcl.audit`); else it writes no file."""

    prepare_process()  # as the command line does
    start = time.perf_counter()
    if cfg.run.audit and cfg.run.keep_messages:
        with tempfile.TemporaryDirectory(prefix="vcl-run-") as folder, contextlib.redirect_stdout(io.StringIO()):
            res = train(type(cfg).from_dict({**cfg.to_dict(), "out": folder}), verbose=False)  # its summary unsaid
    else:
        res = train(cfg, verbose=False, write=False)
    return _record(benchmark, cfg, method, model, res, time.perf_counter() - start, details, extra)


def privacy_figures(res: dict) -> dict:
    """The privacy section's own figures (GAL's: what the organizations read of Alice's labels and residuals)."""
    section = res.get("privacy", {})
    return {k: v for k, v in section.items() if isinstance(v, float) and k != "known_rows"}


def _record(benchmark: str, cfg, method: str, model: str, res: dict, seconds: float, details, extra: dict) -> dict:
    return {
        "benchmark": benchmark,
        "dataset": cfg.data.dataset,
        "method": method,
        "model": model,
        "organizations": cfg.data.organizations,
        "seed": cfg.run.seed,
        "metric": res["metric"],
        "value": res["value"],
        "best_value": res["best_value"],
        **({"auroc": res["auroc"]["test"]} if "test" in res.get("auroc", {}) else {}),  # binary tasks
        **extra,
        "seconds": seconds,
        "seconds_per_round": seconds_per_round(res),
        "round_seconds": res["round_seconds"],
        "stored_parameters": res["stored_parameters"],
        "bytes_sent": res["bytes_sent"],
        **privacy_figures(res),  # what the receivers read (GAL's: of Alice's labels and residuals)
        **(details(res) if details else {}),
    }


@dataclass
class Interleaved:
    """Several jobs run in one process a round at a time, in turn (round 1 in the order given, round 2 reversed, ...),
    so a shared machine's drifting speed falls on all alike; each job's record is what it gives run alone
    (:class:`Job`) but its rounds' seconds. Jobs' configs must compare no other method."""

    jobs: list[Job]

    def __call__(self) -> list[dict]:
        prepare_process()  # as the command line does
        runs, seconds = [], [0.0] * len(self.jobs)
        try:
            for i, job in enumerate(self.jobs):
                start, cfg = time.perf_counter(), job.config
                family = check_config(cfg)
                if set(compare_methods(cfg, family)) - {cfg.method}:
                    raise ValueError(f"Interleaved runs one method a config; {cfg.run_dir} compares others")
                protocol = build_protocol(cfg, run_data(cfg, family=family), family=family)
                runs.append(Run(cfg, protocol, cfg.run_dir, verbose=False))
                seconds[i] += time.perf_counter() - start
            with long_lived_frozen():
                steps = [rounds(run, [], run.config.run.rounds) for run in runs]
                live, turn = list(range(len(runs))), 0
                while live:
                    for i in list(live) if turn % 2 == 0 else live[::-1]:
                        start = time.perf_counter()
                        if next(steps[i], None) is None:
                            live.remove(i)
                        seconds[i] += time.perf_counter() - start
                    turn += 1
            results = []
            for i, run in enumerate(runs):  # the kept models' metrics (the prediction stage)
                start = time.perf_counter()
                results.append(run.results({}))
                seconds[i] += time.perf_counter() - start
        finally:
            for run in runs:
                run.protocol.federation.close()
        return [
            _record(job.benchmark, job.config, job.method, job.model, res, secs, job.details, job.extra)
            for job, res, secs in zip(self.jobs, results, seconds, strict=True)
        ]


def seconds_per_round(res: dict) -> float:
    """A run's seconds per round (``res`` from :func:`vcl.coordinator.runner.train`): the median of its rounds' wall
    seconds, so that the first round's one-time costs or a stalled round do not set it."""
    return statistics.median(res["round_seconds"]) if res["round_seconds"] else 0.0


def report(record) -> None:
    if isinstance(record, list):  # an Interleaved job's records
        for one in record:
            report(one)
        return
    if not isinstance(record, dict) or "value" not in record:
        return  # a script's own job (e.g. one run giving several records) reports itself
    extra = {k: record[k] for k in ("concurrent", "variant", "setting") if k in record}
    print(
        f"{record['dataset']} M={record['organizations']} {record['method']} {record['model']} {extra or ''} "
        f"seed={record['seed']}: {record['metric']} {record['value']:.4f} (best {record['best_value']:.4f}) "
        f"{record['seconds']:.2f}s",
        flush=True,
    )


def _task(job: Callable, threads: int):
    """``job`` with ``threads`` torch threads, here or in a Ray worker: a run's float sums depend on how many threads
    share them, so one setting gives one set of figures whatever the parallelism (the count is restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        return job()
    finally:
        torch.set_num_threads(before)


_STARTED: set[Path] = set()  # the journals this process has started or resumed


def describe(job: Callable) -> str:
    """What a job runs, as a string two calls of the same command give alike (the key of its line in a journal)."""
    if isinstance(job, Job):
        parts = [job.benchmark, job.config.to_dict(), job.method, job.model, getattr(job.details, "__qualname__", None),
                 job.extra]  # fmt: skip
    elif isinstance(job, Interleaved):
        parts = [describe(j) for j in job.jobs]
    elif isinstance(job, partial):
        parts = [job.func.__module__, job.func.__qualname__, list(job.args), job.keywords]
    else:
        parts = [repr(job)]
    return json.dumps(parts, sort_keys=True, default=repr)


def journaled(journal: Path | None, jobs: list[Callable]) -> dict[int, object]:
    """The results ``journal`` holds of ``jobs``, by index: a line counts where its job is described as ``jobs[i]``
    is now (an earlier run of another command, or of changed settings, counts for nothing)."""
    if journal is None or not journal.exists():
        return {}
    keys = {describe(job): i for i, job in enumerate(jobs)}
    held = {}
    for line in journal.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:  # a line cut off by the stop
            continue
        if entry.get("job") in keys:
            held[keys[entry["job"]]] = entry["result"]
    return held


def run_jobs(
    jobs: list[Callable], workers: int = 1, address: str = "", cpus: float = 1.0, gpus: float = 0.0,
    journal: Path | None = None, resume: bool = False,
) -> list:  # fmt: skip
    """Every job's result, in order. A job is a zero-argument callable (a :class:`Job`, or a script's ``partial`` of a
    module-level function), run here one by one (``workers=1``, no address) or as Ray tasks, at most ``workers`` at
    once, each holding ``cpus`` CPUs and ``gpus`` GPUs; each with ``int(cpus)`` torch threads, so the records agree.
    With ``journal``, each finished job's result is appended there as a JSON line (``{"job": describe(job),
    "result": ...}``), and with ``resume`` the jobs it already holds are taken from it, not run again: a long
    benchmark stopped part way goes on where it stopped. Without ``resume`` the journal is started anew (once a
    process: a script's later calls add to it)."""
    threads = max(1, int(cpus))
    held = journaled(journal, jobs) if resume else {}
    if journal is not None and not resume and journal not in _STARTED:  # a script's later calls add to it
        journal.parent.mkdir(parents=True, exist_ok=True)
        journal.write_text("")
    if journal is not None:
        _STARTED.add(journal)
    records: list = [held.get(i) for i in range(len(jobs))]
    queue = [(i, job) for i, job in enumerate(jobs) if i not in held]
    if held:
        print(f"resumed: {len(held)} of {len(jobs)} runs taken from {journal}", flush=True)

    def finished(i: int, result) -> None:
        records[i] = result
        if journal is not None:
            with journal.open("a") as f:
                f.write(_line(jobs[i], result))
        report(result)
        print(f"[{sum(r is not None for r in records)}/{len(jobs)} runs done]", flush=True)

    if workers == 1 and not address:
        for i, job in queue:
            finished(i, _task(job, threads))
        return records
    import ray

    if not ray.is_initialized():
        kwargs = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=max(1, round(workers * cpus)), num_gpus=None if gpus else 0, **kwargs)
    task = ray.remote(_task).options(num_cpus=cpus, num_gpus=gpus)
    pending: dict = {}
    while queue or pending:
        while queue and len(pending) < workers:
            i, job = queue.pop(0)
            pending[task.remote(job, threads)] = i
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            i = pending.pop(ref)
            finished(i, ray.get(ref))
    return records


def _line(job: Callable, result) -> str:
    """The journal's line of a finished job; none where its result is no JSON (a script's own job giving objects it
    turns into records later: it runs again on a resume)."""
    try:
        return strict_json({"job": describe(job), "result": result}, indent=None) + "\n"
    except (TypeError, ValueError):
        return ""
