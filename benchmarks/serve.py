#!/usr/bin/env python
"""The prediction service's latency and throughput: ``python -m vcl.use.serve`` (uvicorn) answering batches of 1, 100
and 10,000 IDs, one request at a time (one client that waits for each answer), then 8 clients at once asking
batches of 1 and 100, on 127.0.0.1, with the organizations in the service's process (``local``) and as party
processes (``grpc``, mutual TLS, each party on its own file).

    python benchmarks/serve.py --quick --out serve_quick.json   # 10^4 people, fewer requests (a few minutes)
    python benchmarks/serve.py --out serve.json                 # 2 x 10^4 people

The data are ``benchmarks/scale.py``'s generated files (8 organizations of 8 features, a text ID column); a GAL run
with Linear organizations and 2 rounds is trained on them first, and the service then serves the same people. Each
record: the batch size, the clients at once, the requests, the p50 and p99 latency of a request, requests and IDs
per second (over the wall time with several clients), and beside them the floor measured in the same run: the p50
of ``GET /live``, an HTTP round trip to the same service that asks no party.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import parse_args, write_records

ROOT = Path(__file__).resolve().parent.parent
BATCHES = (1, 100, 10_000)
CLIENTS = 8  # clients at once, for batches of CONCURRENT_BATCHES
CONCURRENT_BATCHES = (1, 100)


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
    log = run.parent / "service.log"  # its JSON line per request (standard error), which nobody reads as it runs
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    if "serving" not in line:
        proc.kill()
        raise RuntimeError(f"the service did not start: {line}{proc.stdout.read()}{log.read_text()[-2000:]}")
    return proc, int(line.rsplit(":", 1)[1])


def measure(port: int, ids: list[str], batch: int, requests: int, seed: int = 0, clients: int = 1) -> dict:
    """``clients`` clients at once, each on its own connection asking ``requests`` batches of ``batch`` random IDs
    one after the other; then ``GET /live`` (the floor) on one connection."""

    def connect():
        return http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def ask(connection, method: str, path: str, body: bytes | None = None) -> float:
        start = time.perf_counter()
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"{path}: {answer}")
        return time.perf_counter() - start

    def client(k: int) -> list[float]:
        rng = random.Random(seed * 1000 + k)
        bodies = [json.dumps({"ids": rng.sample(ids, batch)}).encode() for _ in range(requests)]
        connection = connect()
        try:
            return [ask(connection, "POST", "/predict", body) for body in bodies]
        finally:
            connection.close()

    first = connect()
    ask(first, "POST", "/predict", json.dumps({"ids": ids[:batch]}).encode())  # what is built once is paid here
    first.close()
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        latencies = [t for times in pool.map(client, range(clients)) for t in times]
    wall = time.perf_counter() - start
    floor = connect()  # a new connection: the server closes one idle for 5 s
    live = [ask(floor, "GET", "/live") for _ in range(max(requests, 20))]
    floor.close()
    ordered = sorted(latencies)
    return {"batch": batch, "clients": clients, "requests": len(latencies),
            "p50_ms": 1e3 * statistics.median(latencies),
            "p99_ms": 1e3 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "requests_per_s": len(latencies) / wall, "ids_per_s": len(latencies) * batch / wall,
            "live_p50_ms": 1e3 * statistics.median(live)}  # fmt: skip


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
        runs = [(batch, 1, counts[batch]) for batch in BATCHES]
        runs += [(batch, CLIENTS, max(1, counts[batch] // CLIENTS)) for batch in CONCURRENT_BATCHES]
        for batch, clients, requests in runs:
            record = measure(port, ids, batch, requests, clients=clients)
            out.append({"benchmark": "serve", "transport": transport, "people": rows, "organizations": len(paths),
                        **record})  # fmt: skip
            print(_line(out[-1]), flush=True)
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def report(records: list[dict]) -> str:
    lines = [
        "| transport | people | organizations | batch (IDs) | clients | requests | p50 ms | p99 ms | requests/s "
        "| IDs/s | floor p50 ms |",
        "|" + "---|" * 11,
    ]
    for r in records:  # records before 2026-11-28h: one client, the floor GET /health (which then asked no party)
        floor = r.get("live_p50_ms", r.get("health_p50_ms"))
        lines.append(
            f"| {r['transport']} | {r['people']} | {r['organizations']} | {r['batch']} | {r.get('clients', 1)} | "
            f"{r['requests']} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['requests_per_s']:.1f} | "
            f"{r['ids_per_s']:.0f} | {floor:.2f} |"
        )
    return "\n".join(lines)


def _line(r: dict) -> str:
    return (f"{r['transport']}: batch {r['batch']} x {r['clients']} clients: p50 {r['p50_ms']:.1f} ms, p99 "
            f"{r['p99_ms']:.1f} ms, {r['ids_per_s']:.0f} IDs/s (GET /live {r['live_p50_ms']:.2f} ms)")  # fmt: skip


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
