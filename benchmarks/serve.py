#!/usr/bin/env python
"""The prediction service's latency and throughput: ``python -m vcl.use.serve`` answering batches of 1, 100 and 10,000
IDs, one request at a time (a bounded load: one client that waits for each answer), on 127.0.0.1, with the organizations
in the service's process (``local``) and as party processes (``grpc``, mutual TLS, each party on its own file).

    python benchmarks/serve.py --quick --out serve_quick.json   # 10^4 people, fewer requests (a few minutes)
    python benchmarks/serve.py --out serve.json                 # 2 x 10^4 people

The data are ``benchmarks/scale.py``'s generated files (8 organizations of 8 features, a text ID column); a GAL run
with Linear organizations and 2 rounds is trained on them first, and the service then serves the same people. Each
record: the batch size, the requests, the p50 and p99 latency, requests and IDs per second, and beside them the
floor measured in the same run: the p50 of ``GET /health``, an HTTP round trip to the same service that asks no
party.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import parse_args, write_records

ROOT = Path(__file__).resolve().parent.parent
BATCHES = (1, 100, 10_000)


def start_service(run: Path, files: list[str]) -> tuple[subprocess.Popen, int]:
    argv = [
        sys.executable,
        "-m",
        "vcl.use.serve",
        "--out",
        str(run),
        "--listen",
        "127.0.0.1:0",
        "--data.csv_files",
        *files,
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    if "serving" not in line:
        proc.kill()
        raise RuntimeError(f"the service did not start: {line}{proc.stdout.read()}")
    return proc, int(line.rsplit(":", 1)[1])


def measure(port: int, ids: list[str], batch: int, requests: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def ask(method: str, path: str, body: bytes | None = None) -> float:
        start = time.perf_counter()
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"{path}: {answer}")
        return time.perf_counter() - start

    bodies = [json.dumps({"ids": rng.sample(ids, batch)}).encode() for _ in range(requests)]
    ask("POST", "/predict", bodies[0])  # the first request pays for what is built once
    latencies = [ask("POST", "/predict", body) for body in bodies]
    health = [ask("GET", "/health") for _ in range(max(requests, 20))]
    connection.close()
    ordered = sorted(latencies)
    total = sum(latencies)
    return {"batch": batch, "requests": requests, "p50_ms": 1e3 * statistics.median(latencies),
            "p99_ms": 1e3 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "requests_per_s": requests / total, "ids_per_s": requests * batch / total,
            "health_p50_ms": 1e3 * statistics.median(health)}  # fmt: skip


def train_run(files: list[str], folder: Path, overrides: dict) -> Path:
    out = folder / "run"
    argv = [sys.executable, "train.py", "--data.dataset", "csv", "--data.task", "classification",
            "--data.csv_files", *files, "--run.rounds", "2", "--compare", "--out", str(out), "--quiet"]  # fmt: skip
    for key, value in overrides.items():
        argv += [f"--{key}", json.dumps(value) if isinstance(value, dict) else str(value)]
    subprocess.run(argv, check=True, cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    return out


def serve_records(transport: str, paths: list[Path], rows: int, folder: Path, counts: dict, fed=None) -> list[dict]:
    files = [str(p) for p in paths] if fed is None else [str(paths[0])] + [p.stem for p in paths[1:]]
    run = train_run(files, folder / transport, {} if fed is None else fed.overrides())
    ids = [f"c{i:09d}" for i in range(rows)]
    proc, port = start_service(run, files)
    try:
        out = []
        for batch in BATCHES:
            record = measure(port, ids, batch, counts[batch])
            out.append({"benchmark": "serve", "transport": transport, "people": rows, "organizations": len(paths),
                        **record})  # fmt: skip
            print(_line(out[-1]), flush=True)
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def report(records: list[dict]) -> str:
    lines = [
        "| transport | people | organizations | batch (IDs) | requests | p50 ms | p99 ms | requests/s | IDs/s "
        "| floor: GET /health p50 ms |",
        "|" + "---|" * 10,
    ]
    for r in records:
        lines.append(
            f"| {r['transport']} | {r['people']} | {r['organizations']} | {r['batch']} | {r['requests']} | "
            f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['requests_per_s']:.1f} | {r['ids_per_s']:.0f} | "
            f"{r['health_p50_ms']:.2f} |"
        )
    return "\n".join(lines)


def _line(r: dict) -> str:
    return (f"{r['transport']}: batch {r['batch']}: p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
            f"{r['ids_per_s']:.0f} IDs/s (GET /health {r['health_p50_ms']:.2f} ms)")  # fmt: skip


def main() -> None:
    from scale import generate  # noqa: I001 (a script beside this one, imported where it runs)

    from vcl.transports.loopback import LoopbackFederation

    args = parse_args(__doc__.splitlines()[0])
    rows = 10_000 if args.quick else 20_000
    counts = {1: 50, 100: 30, 10_000: 5} if args.quick else {1: 300, 100: 100, 10_000: 20}
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = generate(folder, rows)
        records += serve_records("local", paths, rows, folder, counts)
        names = [p.stem for p in paths]
        own = {n: {"csv": str(p), "predict_csv": str(p)} for n, p in zip(names, paths, strict=True)}
        with LoopbackFederation(folder / "fed", names, own=own, max_message_mb=512) as fed:
            records += serve_records("grpc", paths, rows, folder, counts, fed)
    print(report(records))
    write_records(records, args.out)


if __name__ == "__main__":
    main()
