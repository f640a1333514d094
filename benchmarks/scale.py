#!/usr/bin/env python
"""A million rows: GAL (Linear organizations, M = 8) on generated files of N rows per organization, under
``transport: local`` and ``transport: grpc`` (one ``python -m vcl.party`` process per organization on 127.0.0.1),
beside the floors measured in the same run.

    python benchmarks/scale.py --quick --out runs/bench/scale_quick.json   # N = 10^4, 10^5
    python benchmarks/scale.py --out runs/bench/scale.json                 # and 10^6 (grpc: a star PSI of 8 × 10^6 IDs)
    python benchmarks/scale.py --device cuda --rows 1000000 --models linear mlp --transports local   # on a GPU
    python benchmarks/scale.py --rows 1000000 --transports local --predict       # and score N new people a party
    python benchmarks/scale.py --rows 100000 1000000 --transports local --audit  # the audit's cost, off beside on

Each organization's file holds a text ID column, 8 numeric features and (Alice's) a label of 4 classes that depends
on every organization's features; each file lists its rows in its own order. A run is the command line a user types
(``python train.py --data.dataset csv ...``) in a process of its own. Its record: whole wall seconds, seconds in
rounds (results.json: GAL's, and Alone's that the default run compares with), the rest (reading, checking, joining,
preparing, the prediction stage, the interpreter and its imports), of which the data step (results.json's
``data_seconds``: under grpc the star PSI of every party's IDs and Alice's own file), peak RSS of the run's process
and of its largest party process, bytes per round, the final test accuracy (and, on a GPU, peak GPU memory and median
utilization), and each step of the run's process with its seconds, the memory held when it ended and its peak
(``memory_steps``: results.json's ``memory`` beside a sampler of the run's memory, :func:`memory_steps`). Beside
them, each in a process of its own: the bare read of the same files by pyarrow alone, and
``import torch, pytorch_lightning``, each the median of three processes (their samples kept in the record: on this
machine one such process took 5.4 s and the next 7.0 s); Arrow's own inner join of the files' ID columns (each with
its rows' places, one join after another) and its sort of the shared IDs, the alignment done by the library alone
(a floor the target's bound leaves out, also the median of three); the device's read bandwidth (a sum over a
float32 array of the matrix's size, from 512 MiB to 2 GB, on ``--device``), beside which each round is set: its
bytes (the paper's epochs × the matrix) at that bandwidth are the round's read floor; and a random gather's seconds
a row of the matrix and of the targets (:func:`gather_floor`): every organization's rows and targets drawn at
random once an epoch, as minibatches are, are the round's gather floor; with ``--psi``, the star PSI alone. With
``--predict``, each run's ``train.py predict`` of N new people per organization (files of the same shape, another
seed; the realistic shape, whose columns are drawn with its people, scores its training people again from files of
their own), made with the training files moved away: its wall seconds and peak RSS beside the same floors.

Targets (the 2-core development machine): the rest ≤ 3× the bare read plus the imports (under grpc, the rest less
the data step, whose PSI is the libsodium operations' cost: ``benchmarks/psi.py``); peak RSS ≤ 1.2 GB + 6× the
float32 feature matrix; seconds per round at 10^6 ≤ 12× those at 10^5; the grpc run's accuracy equal to the local
one's; a prediction's peak RSS within the same bound on memory. Records: ``{"benchmark": "scale", ...}``, one per
run, one ``"floor"`` per size, one ``"predict"`` per prediction.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import write_records

ROOT = Path(__file__).resolve().parent.parent
ORGANIZATIONS, FEATURES, CLASSES = 8, 8, 4
GB = 1e9  # decimal gigabytes, as the targets are written
MAX_MESSAGE_MB = 512  # each party's limit on one frame, the default of python -m vcl.party (32 MB of PSI at 10^6)


def generate(folder: Path, rows: int, fmt: str = "csv", seed: int = 0) -> list[Path]:
    """M files of ``rows`` rows: ``id`` (text), ``f<m>_<j>`` features; Alice's (``alice``) also ``label``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    ids = np.char.add("c", np.char.zfill(np.arange(rows).astype(str), 9))
    weights = rng.normal(size=(ORGANIZATIONS * FEATURES, CLASSES)).astype(np.float32)
    logits = np.zeros((rows, CLASSES), dtype=np.float32)
    paths = []
    blocks = []
    for m in range(ORGANIZATIONS):
        x = rng.normal(size=(rows, FEATURES)).astype(np.float32)
        logits += x @ weights[m * FEATURES : (m + 1) * FEATURES]
        blocks.append(x)
    label = np.argmax(logits + rng.gumbel(size=logits.shape).astype(np.float32), axis=1)
    for m, x in enumerate(blocks):
        order = rng.permutation(rows)
        name = "alice" if m == 0 else f"org{m}"
        columns = {"id": pa.array(ids[order])}
        columns |= {f"f{m}_{j}": pa.array(np.round(x[order, j], 6)) for j in range(FEATURES)}
        if m == 0:
            columns["label"] = pa.array(label[order])
        table = pa.table(columns)
        path = folder / f"{name}.{fmt}"
        if fmt == "parquet":
            pq.write_table(table, path)
        else:
            pacsv.write_csv(table, path)
        paths.append(path)
    return paths


LEVELS, EMPTY, UNSHARED = 12, 0.01, 0.03  # the realistic shape: text levels, empty cells, rows only one file holds


def generate_realistic(folder: Path, rows: int, seed: int = 0) -> list[Path]:
    """M files shaped like real ones (``--shape realistic``): IDs of UUID length (text), organizations 0, 2, 4, 6 in
    CSV and 1, 3, 5, 7 in Parquet, 4 to 16 numeric features each and one text column of 12 levels (``cat<m>``),
    1 % of every feature's cells empty, 3 % of each file's rows people no other file holds (each file leaves out 3 %
    of the shared people), a label of 3 classes in Alice's file; run with ``data.categorical: onehot`` and
    ``data.missing: impute``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    people = rows  # each file: 97 % of these people and 3 % of its own, ``rows`` rows

    def uuids(n: int) -> np.ndarray:
        raw = rng.bytes(16 * n).hex()  # 32 hex digits an ID, written as a UUID is
        return np.array([f"{raw[i:i + 8]}-{raw[i + 8:i + 12]}-{raw[i + 12:i + 16]}-{raw[i + 16:i + 20]}-"
                         f"{raw[i + 20:i + 32]}" for i in range(0, 32 * n, 32)])  # fmt: skip

    ids = uuids(people)
    widths = rng.integers(4, 17, size=ORGANIZATIONS)
    logits = np.zeros((people, 3), dtype=np.float32)
    blocks = []
    for m in range(ORGANIZATIONS):
        x = rng.normal(size=(people, widths[m])).astype(np.float32)
        level = rng.integers(0, LEVELS, size=people)
        logits += x @ rng.normal(size=(widths[m], 3)).astype(np.float32) + rng.normal(size=(LEVELS, 3))[level]
        blocks.append((x, level))
    label = np.argmax(logits + rng.gumbel(size=logits.shape).astype(np.float32), axis=1)
    paths = []
    for m, (x, level) in enumerate(blocks):
        name = "alice" if m == 0 else f"org{m}"
        keep = np.sort(rng.choice(people, people - int(UNSHARED * people), replace=False))
        own = uuids(people - len(keep))  # people only this file holds
        order = rng.permutation(people)
        row_ids = np.concatenate([ids[keep], own])[order]
        source = np.concatenate([keep, np.full(len(own), -1)])[order]  # -1: a row of its own (random values)
        filler = rng.normal(size=(len(own), widths[m])).astype(np.float32)
        values = np.concatenate([x[keep], filler])[order]
        levels = np.concatenate([level[keep], rng.integers(0, LEVELS, size=len(own))])[order]
        columns = {"id": pa.array(row_ids)}
        for j in range(widths[m]):
            empty = rng.random(people) < EMPTY
            columns[f"f{m}_{j}"] = pa.array(np.round(values[:, j], 6), mask=empty)
        text = np.char.add("level_", np.char.zfill(levels.astype(str), 2))
        columns[f"cat{m}"] = pa.array(text, mask=rng.random(people) < EMPTY)
        if m == 0:
            own_label = rng.integers(0, 3, size=people)
            columns["label"] = pa.array(np.where(source >= 0, label[np.maximum(source, 0)], own_label))
        table = pa.table(columns)
        path = folder / f"{name}.{'parquet' if m % 2 else 'csv'}"
        if m % 2:
            pq.write_table(table, path)
        else:
            pacsv.write_csv(table, path)
        paths.append(path)
    return paths


BARE_READ = """
import sys, time, pyarrow.csv as c, pyarrow.parquet as q
t = time.perf_counter()
for p in sys.argv[1:]:
    (q.read_table(p) if p.endswith('.parquet') else c.read_csv(p)).num_rows
print(time.perf_counter() - t)
"""

BARE_JOIN = """
import sys, time, numpy as np, pyarrow as pa, pyarrow.compute as pc, pyarrow.csv as c, pyarrow.parquet as q
def ids(p):  # the ID column alone, as text, and each row's place in its file
    t = q.read_table(p, columns=['id']) if p.endswith('.parquet') else c.read_csv(
        p, convert_options=c.ConvertOptions(include_columns=['id'], column_types={'id': pa.string()}))
    return t.append_column(p, pa.array(np.arange(t.num_rows)))
tables = [ids(p) for p in sys.argv[1:]]
t = time.perf_counter()
joined = tables[0]
for other in tables[1:]:
    joined = joined.join(other, 'id', join_type='inner')
u = time.perf_counter()
joined.take(pc.sort_indices(joined['id'])).num_rows
print(u - t, time.perf_counter() - u)
"""

READ_BANDWIDTH = """
import sys, time, torch
nbytes, device = int(sys.argv[1]), sys.argv[2]
x = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
wait = torch.cuda.synchronize if device.startswith('cuda') else (lambda: None)
times = []
for _ in range(6):
    wait(); t = time.perf_counter(); x.sum(); wait(); times.append(time.perf_counter() - t)
print(nbytes / min(times[1:]))
"""
RANDOM_GATHER = """
import sys, time, torch
rows, width, targets, classes, batch, device = *map(int, sys.argv[1:6]), sys.argv[6]
wait = torch.cuda.synchronize if device.startswith('cuda') else (lambda: None)
per_row = []
for n, w in ((rows, width), (targets, classes)):
    x = torch.ones(n, w, dtype=torch.float32, device=device)
    picks = torch.randint(0, n, (65, batch), device=device).unbind(0)
    if device == 'cpu':  # NumPy's take: no slower than torch's index_select for rows of 32 bytes, faster for 16
        x, picks = x.numpy(), [p.numpy() for p in picks]
    take = (lambda p: x.take(p, axis=0)) if device == 'cpu' else (lambda p: x.index_select(0, p))
    best = float('inf')
    for _ in range(3):
        take(picks[0]); wait(); t = time.perf_counter()
        for p in picks[1:]:
            take(p)
        wait(); best = min(best, (time.perf_counter() - t) / (64 * batch))
    per_row.append(best)
print(*per_row)
"""
GATHER_BATCH = 1024  # the paper's batch of Linear organizations: a step gathers this many rows of each
BANDWIDTH_BYTES = (512 * 2**20, 2 * 10**9)  # the array the bandwidth is read on: the matrix's size, within these
# (a smaller one is read from the processor's caches, or costs more to start than to read: not the memory's speed)


def child(argv: list[str], env: dict | None = None, samples: list | None = None) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (bytes) and output of a command in a process of its own; ``samples``: a list to append
    (wall clock, RSS) to every 20 ms while it runs, its first entry the start (:func:`memory_steps`). The peak is the
    process's own high-water mark (``VmHWM``, read with each sample), not ``ru_maxrss``: Linux copies a process's
    high-water mark into the child it forks and keeps it across ``exec``, so a benchmark that had generated a large
    table would have every child's figure floored at its own peak (12.61 GB for a run that peaked at 11.26 GB)."""
    start = time.perf_counter()
    if samples is not None:
        samples.append((time.time(), 0))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    peak = [0]
    sampler = threading.Thread(target=_sample_rss, args=(proc, samples, peak), daemon=True)
    sampler.start()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    sampler.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} ... failed:\n{out[-3000:]}")
    return wall, peak[0] or usage.ru_maxrss * 1024, out


def _sample_rss(proc: subprocess.Popen, samples: list | None, peak: list) -> None:
    """Until the process ends: its RSS every 20 ms into ``samples`` (if given), its high-water mark into ``peak[0]``."""
    while proc.returncode is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                status = {k: int(v.split()[0]) * 1024 for k, v in (line.split(":", 1) for line in f) if k in MEMORY}
        except (OSError, ValueError):  # the process has gone (or is a zombie, with no VmRSS)
            return
        if len(status) < len(MEMORY):
            return
        peak[0] = max(peak[0], status["VmHWM"])
        if samples is not None:
            samples.append((time.time(), status["VmRSS"]))
        time.sleep(0.02)


MEMORY = ("VmRSS", "VmHWM")  # what _sample_rss reads of /proc/<pid>/status


def memory_steps(marks: list[dict], samples: list) -> list[dict]:
    """The run's steps (results.json's ``memory``: each step's end, the memory held then and the peak so far,
    :func:`vcl.engine.memory.mark`) with each step's seconds and peak RSS: exact where the peak so far rose during the
    step (the new peak is the step's), else the most the sampler saw in it; a last step, ``exit``, to the process's
    end."""
    out, begin, before = [], samples[0][0], 0
    ends = [*marks, {"step": "exit", "time": samples[-1][0], "rss": samples[-1][1], "peak": 0}]
    for m in ends:
        seen = max([m["rss"], *(rss for t, rss in samples if begin <= t <= m["time"])])
        peak = m["peak"] if m["peak"] and m["peak"] > before else seen
        out.append({"step": m["step"], "seconds": m["time"] - begin, "rss": m["rss"], "peak_rss": peak})
        begin, before = m["time"], max(before, m["peak"] or 0)
    return out


FLOOR_SAMPLES = 3  # each floor is the median of this many processes: one alone moved by ±1 s here from call to call


def floors(paths: list[Path], matrix_bytes: int = 0, device: str = "cpu", classes: int = 0, rows: int = 0) -> dict:
    """The bare read, the imports and Arrow's join and sort of the IDs (``BARE_JOIN``, its ID columns read before
    the clock starts), each the median of three processes; with ``matrix_bytes``, the device's read
    bandwidth (a STREAM-like sum over a float32 array of the matrix's size, from 512 MiB to 2 GB; the best of
    five) and, with ``classes`` and ``rows`` (an organization's), a random gather's seconds a row
    (:func:`gather_floor`)."""
    bandwidth = {}
    if matrix_bytes:
        nbytes = min(max(matrix_bytes, BANDWIDTH_BYTES[0]), BANDWIDTH_BYTES[1])
        _, _, out = child([sys.executable, "-c", READ_BANDWIDTH, str(nbytes), device])
        bandwidth = {"read_bytes_per_second": float(out.strip().splitlines()[-1]), "bandwidth_device": device}
        if classes and rows:
            bandwidth.update(gather_floor(matrix_bytes, rows, len(paths), classes, device))
    reads = [child([sys.executable, "-c", BARE_READ, *map(str, paths)]) for _ in range(FLOOR_SAMPLES)]
    imports = [child([sys.executable, "-c", "import torch, pytorch_lightning"]) for _ in range(FLOOR_SAMPLES)]
    read_seconds = [float(out.strip().splitlines()[-1]) for _, _, out in reads]
    joins = [child([sys.executable, "-c", BARE_JOIN, *map(str, paths)])[2] for _ in range(FLOOR_SAMPLES)]
    join, sort = zip(*(map(float, out.strip().splitlines()[-1].split()) for out in joins), strict=True)
    total = [j + s for j, s in zip(join, sort, strict=True)]
    return {"bare_read_seconds": statistics.median(read_seconds), "bare_read_samples": read_seconds,
            "bare_read_process_seconds": statistics.median(r[0] for r in reads),
            "file_bytes": sum(p.stat().st_size for p in paths), "bare_read_rss": max(r[1] for r in reads),
            "import_seconds": statistics.median(i[0] for i in imports), "import_samples": [i[0] for i in imports],
            "import_rss": max(i[1] for i in imports), "bare_join_total_seconds": statistics.median(total),
            "bare_join_seconds": statistics.median(join), "bare_join_samples": list(join),
            "bare_join_sort_seconds": statistics.median(sort), "bare_join_sort_samples": list(sort),
            **bandwidth}  # fmt: skip


def gather_floor(matrix_bytes: int, rows: int, organizations: int, classes: int, device: str) -> dict:
    """A shuffled epoch's floor: seconds a row to select rows at random (NumPy's ``take`` on a CPU, else torch's
    ``index_select``, of ``GATHER_BATCH`` × organizations fresh random rows, as a step of the organizations fitted
    together does; the best of three passes of 64) from an array of the matrix's size (at most 2 GB) with each
    organization's mean width, and from the targets (N × classes). Reading
    the matrix in order (the read floor) is not what minibatches drawn at random can do: each of their rows is a
    wait on memory. A round's gather floor is every organization's rows and targets gathered once an epoch."""
    width = max(1, round(matrix_bytes / 4 / organizations / rows))
    argv = [min(matrix_bytes, BANDWIDTH_BYTES[1]) // 4 // width, width, rows, classes, GATHER_BATCH * organizations]
    _, _, out = child([sys.executable, "-c", RANDOM_GATHER, *map(str, argv), device])
    row, target = map(float, out.strip().splitlines()[-1].split())
    return {"gather_row_seconds": row, "gather_target_row_seconds": target, "gather_width": width}


def round_read_bytes(model: str, matrix_bytes: int) -> int:
    """The bytes a round of local training reads at least: every organization's block once an epoch (the paper's
    epochs for the model: 100 for Linear and MLP)."""
    from vcl.models import DEEP, PAPER_DEFAULTS

    return PAPER_DEFAULTS[DEEP[model]]["epochs"] * matrix_bytes


SHAPES = {  # --shape: the files' generator, the options a user gives to read them, the label's classes
    "numeric": (generate, [], CLASSES),
    "realistic": (lambda folder, rows, fmt, seed=0: generate_realistic(folder, rows, seed),
                  ["--data.categorical", "onehot", "--data.missing", "impute"], 3),
}  # fmt: skip


def prepared_columns(paths: list[Path]) -> int:
    """The feature columns the files give once prepared: each numeric column, and a text column's levels (one-hot)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    count = 0
    for path in paths:
        table = pq.read_table(path) if path.suffix == ".parquet" else pacsv.read_csv(path)
        for name in table.column_names:
            if name in ("id", "label"):
                continue
            column = table.column(name)
            text = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
            count += sum(1 for level in pc.unique(column.drop_null()).to_pylist() if level != "") if text else 1
    return count


def run(paths, rows, transport, model, rounds, device, folder: Path, fed=None, alone=True, batch=0,
        shape="numeric", columns=ORGANIZATIONS * FEATURES, shuffle="rows", audit=False) -> dict:  # fmt: skip
    """One run in a process of its own; speed, not privacy: it keeps no messages, unless ``audit`` (the defaults:
    every holder keeps a sample of run.keep_rows rows of each message, and the audit attacks them at the end)."""
    out = folder / f"run-{transport}-{model}-{rows}-{batch}-{shuffle}"
    files = [str(p) for p in paths] if fed is None else [str(paths[0])] + [p.stem for p in paths[1:]]
    keep = [] if audit else ["--run.keep_messages", "false"]
    argv = [sys.executable, "train.py", "--data.dataset", "csv", "--data.task", "classification",
            "--data.csv_files", *files, "--learner.model", model, "--run.rounds", str(rounds),
            "--run.device", device, "--learner.batch_size", str(batch), "--out", str(out), "--overwrite",
            "--quiet", *keep, "--learner.shuffle", shuffle, *SHAPES[shape][1]]  # fmt: skip
    if not alone:
        argv += ["--compare"]  # a bare --compare: no method beside GAL
    if fed is not None:
        for key, value in fed.overrides().items():
            argv += [f"--{key}", json.dumps(value) if isinstance(value, dict) else str(value)]
        argv += ["--transport.deadline", "3600"]  # the PSI of 10^6 IDs takes minutes on 2 cores (the default)
    sampler = GPUSampler() if device.startswith("cuda") else None
    samples: list = []
    wall, rss, _ = child(argv, dict(os.environ, PYTHONUNBUFFERED="1"), samples)
    gpu = sampler.stop() if sampler else {}
    results = json.loads((out / "results.json").read_text())
    seconds = list(results["round_seconds"])
    methods = results["seconds"] + sum(c["seconds"] for c in (results.get("compare") or {}).values())
    party_rss = max(_party_peak(pid) for pid in fed.pids().values()) if fed is not None else 0
    return {"benchmark": "scale", "shape": shape, "rows": rows, "organizations": ORGANIZATIONS, "features": columns,
            "transport": transport, "model": model, "device": device, "batch_size": batch, "rounds": rounds,
            "shuffle": shuffle, "wall_seconds": wall,
            "round_seconds": seconds, "seconds_per_round": statistics.median(seconds),
            "rest_seconds": wall - methods, "data_seconds": results.get("data_seconds"),
            "alone_seconds": methods - results["seconds"], "peak_rss": rss,
            "party_peak_rss": party_rss,
            "bytes_per_round": results["bytes_sent"] / max(rounds, 1), "accuracy": results["value"],
            "matrix_bytes": rows * columns * 4, "round_read_bytes": round_read_bytes(model, rows * columns * 4),
            "memory_steps": memory_steps(results.get("memory", []), samples), **gpu,
            "audit": audit, "kept_bytes": sum(f.stat().st_size for f in out.rglob("*.vclw")),
            "attacks": len(results.get("privacy", {}).get("attacks", []))}  # fmt: skip


def predict_run(run_record: dict, new: list[Path], train_folder: Path, folder: Path, fed=None) -> dict:
    """``train.py predict`` of the run that made ``run_record`` on the files ``new``, in a process of its own, with
    the run's training files (``train_folder``) moved away meanwhile: what a user's prediction costs."""
    rows, transport = run_record["rows"], run_record["transport"]
    out = folder / f"run-{transport}-{run_record['model']}-{rows}-{run_record['batch_size']}-{run_record['shuffle']}"
    scored = folder / f"predictions-{transport}-{rows}.csv"
    files = [str(p) for p in new] if fed is None else [str(new[0])] + [p.stem for p in new[1:]]
    argv = [sys.executable, "train.py", "predict", "--out", str(out), "--predictions", str(scored),
            "--data.csv_files", *files]  # fmt: skip
    away = train_folder.with_name(train_folder.name + "-away")
    train_folder.rename(away)
    try:
        wall, rss, _ = child(argv, dict(os.environ, PYTHONUNBUFFERED="1"))
    finally:
        away.rename(train_folder)
    with open(scored) as f:
        count = sum(1 for _ in f) - 1
    scored.unlink()
    party_rss = max(_party_peak(pid) for pid in fed.pids().values()) if fed is not None else 0
    return {"benchmark": "scale", "predict": True, "shape": run_record["shape"], "rows": rows,
            "transport": transport, "model": run_record["model"], "device": run_record["device"],
            "wall_seconds": wall, "peak_rss": rss, "party_peak_rss": party_rss, "predictions": count,
            "matrix_bytes": run_record["matrix_bytes"]}  # fmt: skip


def _party_peak(pid: int) -> int:
    """A live process's peak resident memory (VmHWM), bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


class GPUSampler:
    """nvidia-smi's utilization and memory, twice a second, while a run goes on."""

    def __init__(self):
        self.proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits", "-lms", "500"],
            stdout=subprocess.PIPE,
            text=True,
        )

    def stop(self) -> dict:
        self.proc.terminate()
        rows = [line.split(",") for line in self.proc.communicate()[0].splitlines() if "," in line]
        util = [float(u) for u, _ in rows]
        mem = [float(m) for _, m in rows]
        return {"gpu_utilization_median": statistics.median(util) if util else None,
                "gpu_memory_peak_mib": max(mem) if mem else None}  # fmt: skip


def psi_star(paths: list[Path], folder: Path, rows: int) -> dict:
    """Seconds of the star PSI that aligns the rows of ``paths`` under grpc: each party process reads its own file
    and blinds Alice's IDs and its own; Alice blinds each party's (what a grpc run does before its Setup)."""
    from vcl.datamodules.csv_files import csv_ids

    from vcl.config import RunConfig
    from vcl.coordinator.assembly import psi_with_parties
    from vcl.transports.loopback import LoopbackFederation

    names = [p.stem for p in paths]
    own = {p.stem: {"csv": str(p)} for p in paths}
    with LoopbackFederation(folder / f"psi-{len(paths)}", names, own=own, max_message_mb=MAX_MESSAGE_MB) as fed:
        config = RunConfig.from_dict({"data.dataset": "csv", "data.task": "classification",
                                      "data.csv_files": [str(paths[0])] + names[1:], **fed.overrides(),
                                      "transport.deadline": 3600.0})  # fmt: skip
        start = time.perf_counter()
        lists, _ = psi_with_parties(config, names, csv_ids(paths[0]), [False] * len(names))
        seconds = time.perf_counter() - start
    return {"benchmark": "scale", "psi": True, "rows": rows, "organizations": len(names), "seconds": seconds,
            "shared": min(len(x) for x in lists)}  # fmt: skip


def report(records: list[dict]) -> str:
    lines = [
        "| rows per organization | transport | model | device | whole run s | rounds: s per round | rest s "
        "| bare read s | import s | peak RSS GB (run / party) | float32 matrix GB | bytes per round | accuracy |",
        "|" + "---|" * 13,
    ]
    floor = {r["rows"]: r for r in records if r.get("floor")}
    for r in records:
        if r.get("floor") or r.get("psi") or r.get("predict"):
            continue
        rows, read, imports, peak = _cells(r, floor)
        lines.append(
            f"| {rows} | {r['transport']} | {r['model']} | {r['device']} | {r['wall_seconds']:.1f} "
            f"| {r['seconds_per_round']:.3f} | {r['rest_seconds']:.1f} | {read:.2f} | {imports:.2f} | {peak} "
            f"| {r['matrix_bytes'] / GB:.3f} | {r['bytes_per_round']:,.0f} | {r['accuracy']:.4f} |"
        )
    gpu = [r for r in records if r.get("gpu_memory_peak_mib") is not None]
    if gpu:
        lines += [
            "",
            "| rows per organization | transport | model | batch size | s per round | data step s "
            "| GPU utilization, median % | GPU memory, peak MiB |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in gpu:
            data = f"{r['data_seconds']:.1f}" if r.get("data_seconds") is not None else "–"
            lines.append(
                f"| {r['rows']:,} | {r['transport']} | {r['model']} | {r.get('batch_size') or 'default'} "
                f"| {r['seconds_per_round']:.1f} | {data} | {r['gpu_utilization_median']:.0f} "
                f"| {r['gpu_memory_peak_mib']:.0f} |"
            )
    predictions = [r for r in records if r.get("predict")]
    if predictions:
        lines += [
            "",
            "`train.py predict` of N new people per organization, the training files moved away:",
            "",
            "| rows per organization | transport | predictions | whole s | bare read s | import s "
            "| peak RSS GB (run / party) | float32 matrix GB |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in predictions:
            rows, read, imports, peak = _cells(r, floor)
            lines.append(
                f"| {rows} | {r['transport']} | {r['predictions']:,} | {r['wall_seconds']:.1f} | {read:.2f} "
                f"| {imports:.2f} | {peak} | {r['matrix_bytes'] / GB:.3f} |"
            )
    audited = [r for r in records if r.get("audit")]
    if audited:
        lines += ["", "The audit's cost: each run with the defaults (every holder keeps a sample of run.keep_rows rows "
                  "of each message, the audit attacks them at the end) beside the run just before it with nothing "
                  "kept:", "",
                  "| rows per organization | whole s off / on | ratio | peak RSS GB off / on | ratio | kept MB | "
                  "attacks |", "|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in audited:
            [off] = [o for o in records[: records.index(r)][-1:] if not o.get("audit") and o["rows"] == r["rows"]]
            lines.append(f"| {r['rows']:,} | {off['wall_seconds']:.1f} / {r['wall_seconds']:.1f} "
                         f"| {r['wall_seconds'] / off['wall_seconds']:.3f} | {off['peak_rss'] / GB:.2f} / "
                         f"{r['peak_rss'] / GB:.2f} | {r['peak_rss'] / off['peak_rss']:.3f} | "
                         f"{r['kept_bytes'] / 1e6:.1f} | {r['attacks']} |")  # fmt: skip
    targets = []
    psi = {r["rows"]: r["seconds"] for r in records if r.get("psi")}
    for r in predictions:
        memory, peak = 1.2e9 + 6 * r["matrix_bytes"], max(r["peak_rss"], r["party_peak_rss"])
        f = floor.get(r["rows"], {})
        budget = 3 * f.get("bare_read_seconds", float("nan")) + f.get("import_seconds", float("nan"))
        targets.append(
            f"- predict {r['rows']:,} rows, {r['transport']}: peak RSS {peak / 1e9:.2f} GB against ≤ {memory / 1e9:.2f}"
            f" GB: {'met' if peak <= memory else 'NOT met'}; {r['wall_seconds']:.1f} s against 3 × bare read + "
            f"imports {budget:.1f} s ({r['wall_seconds'] / budget:.1f}×)"
        )
    for r in records:
        if r.get("floor") or r.get("psi") or r.get("predict") or r["device"] != "cpu":
            continue
        f = floor[r["rows"]]
        budget = 3 * f["bare_read_seconds"] + f["import_seconds"]
        rest, what = r["rest_seconds"], "rest"
        if r["transport"] == "grpc" and r.get("data_seconds") is not None:
            rest, what = rest - r["data_seconds"], f"rest less the data step (its star PSI; {r['data_seconds']:.1f} s)"
        elif r["transport"] == "grpc" and r["rows"] in psi:
            rest, what = rest - psi[r["rows"]], "rest less the star PSI"
        memory = 1.2e9 + 6 * r["matrix_bytes"]
        peak = max(r["peak_rss"], r["party_peak_rss"])
        targets.append(
            f"- {r['rows']:,} rows, {r['transport']}: {what} {rest:.1f} s against ≤ {budget:.1f} s (3 × bare read + "
            f"imports): {'met' if rest <= budget else 'NOT met'}; peak RSS {peak / 1e9:.2f} GB against ≤ "
            f"{memory / 1e9:.2f} GB: {'met' if peak <= memory else 'NOT met'}"
        )
        align = next((s["seconds"] for s in r.get("memory_steps", []) if s["step"] == "align"), None)
        if r["transport"] == "local" and align is not None and "bare_join_total_seconds" in f:
            join = f["bare_join_total_seconds"]  # the median process's join and sort (each also kept alone)
            targets.append(
                f"- {r['rows']:,} rows, local: the align step {align:.2f} s against Arrow's own inner join and sort of "
                f"the files' IDs {join:.2f} s (medians: join {f['bare_join_seconds']:.2f}, sort "
                f"{f['bare_join_sort_seconds']:.2f}; {align / join:.2f}×), a floor the bound leaves out: the rest "
                f"{rest:.1f} s against 3 × bare read + imports + that join {budget + join:.1f} s"
            )
    for r in records:
        sized = floor.get(r["rows"], {}) if "round_read_bytes" in r else {}
        if bandwidth := sized.get("read_bytes_per_second"):
            least = r["round_read_bytes"] / bandwidth
            ratio = r["seconds_per_round"] / least
            target = f" (≤ 4: {'met' if ratio <= 4 else 'NOT met'})" if r["device"] == "cpu" else ""
            gathered = ""
            if "gather_row_seconds" in sized and not r.get("batch_size"):  # the paper's batch: rows drawn at random
                epochs = r["round_read_bytes"] / r["matrix_bytes"]
                rows = epochs * r["organizations"] * r["rows"]
                gather = rows * (sized["gather_row_seconds"] + sized["gather_target_row_seconds"])
                gathered = (f"; against the gather floor {gather:.2f} s (every organization's rows and targets "
                            f"selected at random once an epoch): {r['seconds_per_round'] / gather:.1f}×")  # fmt: skip
            targets.append(
                f"- {r['rows']:,} rows, {r['transport']} {r['model']} {r['device']}, batch "
                f"{r.get('batch_size') or 'default'}, order {r.get('shuffle', 'rows')}: a round "
                f"{r['seconds_per_round']:.2f} s against the read floor "
                f"{least:.3f} s ({r['round_read_bytes'] / GB:.1f} GB at {bandwidth / GB:.1f} GB/s): "
                f"{ratio:.1f}×{target}{gathered}"
            )
    runs = [r for r in records if "seconds_per_round" in r and not r.get("batch_size")]  # the default batch
    by = {(r["rows"], r["transport"], r["model"], r["device"], r.get("shuffle", "rows")): r for r in runs}
    for (rows, transport, model, device, shuffle), r in by.items():
        small = by.get((rows // 10, transport, model, device, shuffle))
        if small and rows >= 10**6:
            ratio = r["seconds_per_round"] / small["seconds_per_round"]
            targets.append(f"- {transport} {model} {device}: s per round at {rows:,} / at {rows // 10:,} = {ratio:.1f} "
                         f"(≤ 12: {'met' if ratio <= 12 else 'NOT met'})")  # fmt: skip
        if transport == "grpc" and (local := by.get((rows, "local", model, device, shuffle))):
            same = abs(r["accuracy"] - local["accuracy"]) < 1e-9
            order = "" if shuffle == "rows" else f", order {shuffle}"
            targets.append(f"- {rows:,} rows{order}: grpc accuracy {r['accuracy']:.4f}, local {local['accuracy']:.4f}: "
                         f"{'equal' if same else 'NOT equal'}")  # fmt: skip
    for r in records:
        if r.get("psi"):
            targets.append(
                f"- star PSI, {r['organizations']} parties × {r['rows']:,} IDs under grpc: {r['seconds']:.1f} s"
            )
    if targets:
        lines += ["", "Targets:", *targets]
    return "\n".join(lines)


def _cells(r: dict, floor: dict) -> tuple[str, float, float, str]:
    """A record's cells its tables share: its rows (and shape), its size's bare read and import seconds (NaN if the
    record has no floor), its peak RSS (the run's, and the largest party's)."""
    f = floor.get(r["rows"], {})
    party = f" / {r['party_peak_rss'] / GB:.2f}" if r["party_peak_rss"] else ""
    shape = " (realistic)" if r.get("shape") == "realistic" else ""
    nan = float("nan")
    return (
        f"{r['rows']:,}{shape}",
        f.get("bare_read_seconds", nan),
        f.get("import_seconds", nan),
        f"{r['peak_rss'] / GB:.2f}{party}",
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="N = 10^4 and 10^5 (full: and 10^6, and the star PSI)")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    p.add_argument("--rows", type=int, nargs="+", default=None, help="rows per organization (instead of the sizes)")
    p.add_argument("--transports", nargs="+", default=["local", "grpc"], choices=["local", "grpc"])
    p.add_argument("--models", nargs="+", default=["linear"], help="learner.model for every organization")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[0], help="learner.batch_size (0: the default)")
    p.add_argument("--shuffles", nargs="+", default=["rows"], choices=["rows", "blocks"],
                   help="learner.shuffle: the batches' order (each is a run of its own)")  # fmt: skip
    p.add_argument("--format", default="csv", choices=["csv", "parquet"], help="numeric shape: the files' format")
    p.add_argument("--shape", default="numeric", choices=list(SHAPES),
                   help="numeric (text IDs, 8 numeric features each) or realistic (UUID IDs, CSV and Parquet, a text "
                   "column, empty cells, 4-16 features, unshared rows, 3 classes)")  # fmt: skip
    p.add_argument("--folder", default=None, help="where the generated files go (default: a temporary folder)")
    p.add_argument("--no-alone", action="store_true", help="run GAL without the Alone run the default compares")
    p.add_argument("--psi", action="store_true", help="also time the star PSI alone beside the grpc runs")
    p.add_argument("--no-psi", action="store_true", help="no separate star PSI (the default; earlier records' flag)")
    p.add_argument("--predict", action="store_true", help="also time train.py predict of N new people per organization")
    p.add_argument(
        "--audit",
        action="store_true",
        help="each local run twice: without kept messages, then as the defaults (kept rows, the audit)",
    )
    args = p.parse_args()
    sizes = args.rows or ([10**4, 10**5] if args.quick else [10**4, 10**5, 10**6])
    records = []
    with tempfile.TemporaryDirectory(dir=args.folder) as tmp:
        folder = Path(tmp)
        for rows in sizes:
            data = folder / f"data-{rows}"
            data.mkdir()
            paths = SHAPES[args.shape][0](data, rows, args.format)
            new = []
            if args.predict:  # new people: files of the same shape from another seed, in a folder of their own (the
                # realistic shape draws its columns with its people: its "new" people are the training people again)
                (folder / f"new-{rows}").mkdir()
                new = SHAPES[args.shape][0](folder / f"new-{rows}", rows, args.format, int(args.shape == "numeric"))
            columns = prepared_columns(paths) if args.shape != "numeric" else ORGANIZATIONS * FEATURES
            floor = floors(paths, rows * columns * 4, args.device, SHAPES[args.shape][2], rows)
            records.append({"benchmark": "scale", "floor": True, "shape": args.shape, "rows": rows, **floor})
            for transport in args.transports:
                if transport == "grpc" and rows < 10**5:
                    continue
                for model, batch, shuffle in itertools.product(args.models, args.batch_sizes, args.shuffles):
                    common = (rows, transport, model, args.rounds, args.device, folder)
                    shaped = {"shape": args.shape, "columns": columns, "shuffle": shuffle}
                    if transport == "local":
                        if args.audit:  # the same run with the audit off, then on (the defaults), side by side
                            records.append(run(paths, *common, None, not args.no_alone, batch, **shaped))
                            print(_line(records[-1]), flush=True)
                        records.append(run(paths, *common, None, not args.no_alone, batch, **shaped,
                                           audit=args.audit))  # fmt: skip
                        if new:
                            print(_line(records[-1]), flush=True)
                            records.append(predict_run(records[-1], new, data, folder))
                    else:
                        from vcl.transports.loopback import LoopbackFederation

                        own = {p.stem: {"csv": str(p), **({"predict_csv": str(q)} if new else {})}
                               for p, q in itertools.zip_longest(paths, new)}  # fmt: skip
                        names = [p.stem for p in paths]
                        fed_folder = folder / f"fed-{rows}-{model}-{batch}-{shuffle}"
                        loopback = LoopbackFederation(
                            fed_folder, names, own=own, max_message_mb=MAX_MESSAGE_MB, preload=True
                        )
                        with loopback as fed:
                            records.append(run(paths, *common, fed, not args.no_alone, batch, **shaped))
                            if new:
                                print(_line(records[-1]), flush=True)
                                records.append(predict_run(records[-1], new, data, folder, fed))
                    print(_line(records[-1]), flush=True)
                    write_records(records, args.out)  # kept as it goes: a long sweep cut short keeps its runs
            if "grpc" in args.transports and rows >= 10**5 and args.format == "csv" and args.psi:
                records.append(psi_star(paths, folder, rows))  # the alignment's share of the grpc run's rest
                print(f"star PSI of {len(paths)} parties x {rows:,} IDs: {records[-1]['seconds']:.1f} s", flush=True)
            for p in [*paths, *new]:
                p.unlink()
    write_records(records, args.out)
    print(report(records))


def _line(r: dict) -> str:
    if r.get("predict"):
        return (f"{r['rows']:,} rows {r['transport']} predict: {r['predictions']:,} predictions, "
                f"{r['wall_seconds']:.1f} s, peak {r['peak_rss'] / GB:.2f} GB")  # fmt: skip
    audit = f", audit on ({r['attacks']} attacks, {r['kept_bytes'] / 1e6:.1f} MB kept)" if r.get("audit") else ""
    return (
        f"{r['rows']:,} rows {r['transport']} {r['model']} {r.get('shuffle', 'rows')}: {r['wall_seconds']:.1f} s, "
        f"{r['seconds_per_round']:.3f} "
        f"s/round, peak {r['peak_rss'] / GB:.2f} GB, accuracy {r['accuracy']:.4f}{audit}"
    )


if __name__ == "__main__":
    main()
