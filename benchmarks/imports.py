"""What each package vcl imports inside a function would cost every run that never uses it: its import's seconds in a
fresh process that has imported torch and Lightning already (what every run imports), median of ``--repeats``.

``tests/test_imports.py`` holds every function-level import of a third-party package to a reason written there, and
each such package to a measurement in this record: a package whose import costs a run nothing measurable would sit
at the top of its module.

    python benchmarks/imports.py --out docs/records/<dir>/imports.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the packages (and the submodules the code imports) of vcl's function-level imports, by what they are imported as
PACKAGES = {
    "sklearn": "sklearn.linear_model, sklearn.ensemble, sklearn.tree, sklearn.preprocessing, sklearn.decomposition",
    "ray": "ray",
    "grpc": "grpc",
    "cryptography": "cryptography.x509, cryptography.hazmat.primitives.asymmetric.ec",
    "nacl": "nacl.bindings",
    "xgboost": "xgboost",
    "skops": "skops.io",
    "scipy": "scipy.stats",
    "matplotlib": "matplotlib.pyplot",
    "uvicorn": "uvicorn",
    "starlette": "starlette.applications, starlette.routing",
    "mlxtend": "mlxtend.data",
    "torchvision": "torchvision",
    "tensorboard": "torch.utils.tensorboard",
    "pyarrow.csv": "pyarrow.csv, pyarrow.parquet, pyarrow.compute",
    "jsonargparse": "jsonargparse",
    "yaml": "yaml",
    "rich": "rich.progress",
    "filelock": "filelock",
    "torchmetrics": "torchmetrics.functional.classification",
    "lightning_loggers": "pytorch_lightning.loggers",
}
PROBE = """
import time, sys
t = time.perf_counter(); import torch, pytorch_lightning; base = time.perf_counter() - t
t = time.perf_counter()
try:
    exec("import " + sys.argv[1])
    print(base, time.perf_counter() - t)
except ImportError:
    print(base, "absent")
"""


def measure(modules: str) -> tuple[float, float | None]:
    out = subprocess.run([sys.executable, "-c", PROBE, modules], capture_output=True, text=True, cwd=ROOT, check=True)
    base, extra = out.stdout.split()
    return float(base), None if extra == "absent" else float(extra)


def report(record: dict) -> str:
    """The record as a table: each deferred package's seconds after torch and Lightning."""
    lines = [f"torch + Lightning: {record['import_torch_lightning_seconds']:.2f} s; then each package's import:", "",
             "| package | modules | seconds |", "|---|---|---|"]  # fmt: skip
    for name, row in record["deferred"].items():
        seconds = "not installed" if row["seconds"] is None else f"{row['seconds']:.4f}"
        lines.append(f"| {name} | `{row['modules']}` | {seconds} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    rows, bases = {}, []
    for name, modules in PACKAGES.items():
        runs = [measure(modules) for _ in range(args.repeats)]
        bases += [b for b, _ in runs]
        extra = [e for _, e in runs if e is not None]
        rows[name] = {"modules": modules, "seconds": statistics.median(extra) if extra else None}
        print(f"{name:18s} {rows[name]['seconds'] if extra else 'not installed'}")
    record = {"import_torch_lightning_seconds": statistics.median(bases), "deferred": rows, "repeats": args.repeats}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    from common import record_versions  # after the measurements: it imports vcl (and torch) into this process

    record_versions(args.out)
    print(f"torch + Lightning: {record['import_torch_lightning_seconds']:.2f} s (median of {len(bases)})")


if __name__ == "__main__":
    main()
