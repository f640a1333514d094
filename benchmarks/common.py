"""The contract every benchmark script shares: ``--quick``, ``--out FILE``, records, a markdown table.

A record is one (dataset, method, model, organizations, seed) run: ``value`` is the honest figure
(final round, or the round chosen on validation data), ``best_value`` the best test figure over
rounds 0..T — the way the papers report. Accuracy is a fraction; MAD is in target units.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse_args(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="reduced run of about a minute on a 2-core CPU")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="run seeds")
    return p.parse_args()


def run_record(benchmark: str, cfg, method: str, model: str, details=None, **extra) -> dict:
    """Run one config (no files written) and return its record; prints a one-line progress report.

    ``details(results)`` may add keys from the full results (e.g. a per-round curve) to the record.
    """
    from vcl.runner import train

    start = time.perf_counter()
    res = train(cfg, verbose=False, write=False)
    record = {
        "benchmark": benchmark,
        "dataset": cfg.dataset,
        "method": method,
        "model": model,
        "organizations": cfg.organizations,
        "seed": cfg.seed,
        "metric": res["metric"],
        "value": res["value"],
        "best_value": res["best_value"],
        **extra,
        "seconds": time.perf_counter() - start,
        "seconds_per_round": res["seconds"] / max(1, len(res["rounds"]) - 1),
        "stored_parameters": res["stored_parameters"],
        "bytes_sent": res["bytes_sent"],
        **(details(res) if details else {}),
    }
    print(
        f"{cfg.dataset} M={cfg.organizations} {method} {model} {extra or ''} seed={cfg.seed}: {res['metric']} "
        f"{res['value']:.4f} (best {res['best_value']:.4f}) {record['seconds']:.2f}s",
        flush=True,
    )
    return record


def write_records(records: list[dict], path: str | None) -> None:
    if not path:
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(records, indent=1))
    os.replace(tmp, out)
    print(f"wrote {len(records)} records to {out}")


def summarize(records: list[dict], paper: dict, keys=("dataset", "organizations", "method", "model")) -> str:
    """Markdown: mean (std) and median over seeds of value and best_value, the paper's figure beside."""
    groups = defaultdict(list)
    for r in records:
        groups[tuple(r[k] for k in keys)].append(r)
    lines = [
        "| " + " | ".join(keys) + " | metric | ours: value mean (std) | median | ours: best-over-rounds mean (std)"
        " | paper (best over rounds) | seconds/run |",
        "|" + "---|" * (len(keys) + 6),
    ]
    for key, rs in groups.items():
        vals, best = [r["value"] for r in rs], [r["best_value"] for r in rs]
        scale = 100.0 if rs[0]["metric"] == "accuracy" else 1.0
        ref = paper.get(key)
        lines.append(
            "| " + " | ".join(str(k) for k in key) + f" | {rs[0]['metric']} | {_ms(vals, scale)}"
            f" | {statistics.median(vals) * scale:.1f} | {_ms(best, scale)}"
            f" | {'—' if ref is None else f'{ref[0]:.1f} ({ref[1]:.1f})'}"
            f" | {statistics.median(r['seconds'] for r in rs):.2f} |"
        )
    return "\n".join(lines)


def _ms(values, scale) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values) * scale:.1f} ({sd * scale:.1f})"
