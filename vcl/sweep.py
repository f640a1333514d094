"""Many runs at once: a benchmark's runs, in this process one after another, or as Ray tasks on a cluster.

A :class:`Job` is one run of a config that writes no file; :func:`run_jobs` returns the jobs' records in the
order the jobs were given, whatever order they finish in, so ``--workers 4`` writes the records
``--workers 1`` writes (their ``seconds`` aside). Each task sizes torch's thread pool to the CPUs it was
given: several runs sharing a machine with torch's default threads each are many times slower.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field


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
    """Run one config (no files written) and return its record."""
    from vcl.memory import reuse_freed_memory
    from vcl.runner import train

    reuse_freed_memory()  # as the command line does
    start = time.perf_counter()
    res = train(cfg, verbose=False, write=False)
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
        **extra,
        "seconds": time.perf_counter() - start,
        "seconds_per_round": seconds_per_round(res),
        "round_seconds": res["round_seconds"],
        "stored_parameters": res["stored_parameters"],
        "bytes_sent": res["bytes_sent"],
        **(details(res) if details else {}),
    }


def seconds_per_round(res: dict) -> float:
    """A run's seconds per round (``res`` from :func:`vcl.runner.train`): the median of its rounds' wall seconds.
    The median, not the mean, so that one slow round does not set the figure: the first round pays one-time
    costs (the process's heap grows to a round's size, ~2,500 page faults at 64 organizations on digits; the
    learners are built) and a busy machine stalls a round now and then. Records keep every round's seconds
    (``round_seconds``), so the mean and the first round can be read from them too."""
    return statistics.median(res["round_seconds"]) if res["round_seconds"] else 0.0


def report(record) -> None:
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
    import torch

    torch.set_num_threads(max(1, threads))
    return job()


def run_jobs(jobs: list[Callable], workers: int = 1, address: str = "", cpus: float = 1.0, gpus: float = 0.0) -> list:
    """Every job's result, in order. A job is a zero-argument callable: a :class:`Job` (its record) or a
    script's own ``functools.partial`` of a module-level function. Here one by one (``workers=1``, no
    address), or as Ray tasks, at most ``workers`` at once, each holding ``cpus`` CPUs and ``gpus`` GPUs (a
    cluster at ``address``, or a local Ray instance sized to ``workers × cpus``)."""
    if workers == 1 and not address:
        records = []
        for job in jobs:
            records.append(job())
            report(records[-1])
        return records
    import ray

    if not ray.is_initialized():
        kwargs = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=max(1, round(workers * cpus)), num_gpus=None if gpus else 0, **kwargs)
    task = ray.remote(_task).options(num_cpus=cpus, num_gpus=gpus)
    threads = max(1, int(cpus))
    records: list = [None] * len(jobs)
    pending: dict = {}
    queue = list(enumerate(jobs))
    while queue or pending:
        while queue and len(pending) < workers:
            i, job = queue.pop(0)
            pending[task.remote(job, threads)] = i
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            i = pending.pop(ref)
            records[i] = ray.get(ref)
            report(records[i])
    return records
