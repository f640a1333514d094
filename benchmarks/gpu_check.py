#!/usr/bin/env python
"""One command for a CUDA machine: the GPU tests, GAL on the MNIST subset with M = 8 CNN organizations
fitted concurrently and one after another, GPU utilization and peak memory.

    python benchmarks/gpu_check.py --out runs/bench/gpu_check.json     # also writes gpu_check.md beside it

Each step runs in its own process (a fresh CUDA context, its own peak-memory count). Without a CUDA
device it says so and exits 0. ``--quick`` shrinks the GAL step (narrow CNN, 2 epochs) for a smoke test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPER_CNN = {"learner.cnn_widths": [64, 128, 256, 512], "learner.epochs": 10, "learner.batch_size": 512}
QUICK_CNN = {"learner.cnn_widths": [8, 16, 32, 64], "learner.epochs": 2, "learner.batch_size": 256}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a narrow CNN and 2 epochs in the GAL step")
    p.add_argument("--out", default="runs/bench/gpu_check.json", help="JSON record file (markdown beside it)")
    p.add_argument("--rounds", type=int, default=3, help="GAL rounds per timed run")
    p.add_argument("--skip-tests", action="store_true", help="only the GAL timing step")
    p.add_argument("--step", choices=["gal"], help=argparse.SUPPRESS)  # internal: one step in this process
    p.add_argument("--concurrent", type=int, default=1, help=argparse.SUPPRESS)
    return p.parse_args(argv)


class UtilizationSampler:
    """Samples the GPU's utilization (percent busy) every ``period`` seconds in a background thread."""

    def __init__(self, period: float = 0.2):
        self.period, self.samples, self._stop = period, [], threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import torch

        while not self._stop.is_set():
            try:
                self.samples.append(float(torch.cuda.utilization()))
            except Exception:  # no NVML: nothing to sample
                return
            time.sleep(self.period)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def gal_step(args) -> dict:
    """GAL on the MNIST subset, M = 8 CNN organizations, in this process; one JSON record."""
    import torch

    from vcl.config import RunConfig
    from vcl.coordinator.runner import train
    from vcl.coordinator.sweep import seconds_per_round

    values = {
        "data.dataset": "mnist_subset",
        "data.organizations": 8,
        "learner.model": ["cnn"],
        "run.rounds": args.rounds,
        "compare": [],
        "run.device": "cuda",
        "run.concurrent": bool(args.concurrent),
        "out": "",
        **(QUICK_CNN if args.quick else PAPER_CNN),
    }
    torch.cuda.reset_peak_memory_stats()
    with UtilizationSampler() as sampler:
        res = train(RunConfig.from_dict(values), verbose=False, write=False)
    return {
        "step": "gal_mnist_subset",
        "organizations": 8,
        "concurrent": bool(args.concurrent),
        "rounds": args.rounds,
        "cnn_widths": values["learner.cnn_widths"],
        "epochs": values["learner.epochs"],
        "accuracy": res["value"],
        "seconds_per_round": seconds_per_round(res),
        "gpu_utilization_median": statistics.median(sampler.samples) if sampler.samples else None,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
        "device_name": torch.cuda.get_device_name(),
    }


def run_tests() -> dict:
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "gpu",
            "-o",
            "addopts=-q",
            "-p",
            "no:cacheprovider",
            "tests/test_gpu.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error)", tail[0])}
    if proc.returncode not in (0, 5):
        print(proc.stdout[-6000:], proc.stderr[-3000:], sep="\n")
    return {
        "step": "pytest -m gpu",
        "returncode": proc.returncode,
        **counts,
        "summary": tail[0],
        "seconds": time.perf_counter() - start,
    }


def run_gal(args, concurrent: bool) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--step",
        "gal",
        "--concurrent",
        str(int(concurrent)),
        "--rounds",
        str(args.rounds),
    ]
    proc = subprocess.run(cmd + (["--quick"] if args.quick else []), cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"step": "gal_mnist_subset", "concurrent": concurrent, "error": proc.stderr.strip()[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def markdown(records: list[dict], when: str) -> str:
    device = next((r["device_name"] for r in records if "device_name" in r), "?")
    lines = [f"# GPU check, {when}, {device}", ""]
    for r in records:
        if r["step"] == "pytest -m gpu":
            lines.append(f"- `pytest -m gpu`: {r['summary']} (exit {r['returncode']}, {r['seconds']:.0f} s)")
    gal = {r["concurrent"]: r for r in records if r["step"] == "gal_mnist_subset" and "error" not in r}
    lines += [
        "",
        "| GAL, MNIST subset, M = 8 CNNs | s/round | accuracy | GPU util. (median %) | peak GiB |",
        "|---|---|---|---|---|",
    ]
    for conc in (True, False):
        if conc in gal:
            r = gal[conc]
            util = "—" if r["gpu_utilization_median"] is None else f"{r['gpu_utilization_median']:.0f}"
            lines.append(
                f"| {'concurrent' if conc else 'sequential'} | {r['seconds_per_round']:.2f} | "
                f"{r['accuracy']:.4f} | {util} | {r['peak_memory_gib']:.2f} |"
            )
    if True in gal and False in gal:
        lines.append(f"\nConcurrent speed-up: {gal[False]['seconds_per_round'] / gal[True]['seconds_per_round']:.2f}×")
    for r in records:
        if "error" in r:
            lines.append(f"\n{r['step']} (concurrent={r.get('concurrent')}) failed: {r['error'][-500:]}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    from vcl.engine.memory import prepare_process

    prepare_process()  # as the command line does (vcl.engine.memory)
    if args.step == "gal":
        print(json.dumps(gal_step(args)))
        return 0
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device on this machine; nothing to check.")
        return 0
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    records = [] if args.skip_tests else [run_tests()]
    if records:
        print(records[-1]["summary"], flush=True)
    for concurrent in (True, False):
        records.append(run_gal(args, concurrent))
        print(json.dumps(records[-1]), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(records, indent=1))
    from common import record_versions  # benchmarks/common.py, beside this script

    record_versions(out)
    text = markdown(records, time.strftime("%Y-%m-%d"))
    out.with_suffix(".md").write_text(text)
    print(text)
    failed = any("error" in r for r in records) or any(r.get("returncode", 0) not in (0, 5) for r in records)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
