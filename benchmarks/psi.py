#!/usr/bin/env python
"""Seconds of a private set intersection of row IDs (``vcl/alignment/psi.py``: ECDH over X25519), per size.

    python benchmarks/psi.py --quick --out runs/bench/psi_quick.json   # 10^3, 10^4, 10^5 IDs per side
    python benchmarks/psi.py --out runs/bench/psi.json                 # and 10^6

Each size runs the whole protocol between two sides in one process: both offers, both answers, both matches
(four blindings of N values, over the machine's cores), with half of each side's IDs shared. The seconds are
the median of ``--repeats`` runs. Targets on the 2-core development machine: 10^5 IDs per side in at most 6 s,
10^6 in at most 60 s. Records: ``{"benchmark": "psi", "ids", "seconds", "protocol", "shared", "bytes"}``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import write_records

from vcl.alignment.psi import PROTOCOL, PSISide, intersect

TARGETS = {10**5: 6.0, 10**6: 60.0}  # seconds, on the 2-core development machine


def one(ids: int, repeats: int) -> dict:
    a = [f"customer-{i}" for i in range(ids)]
    b = [f"customer-{i}" for i in range(ids // 2, ids + ids // 2)]
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        a_rows, b_rows = intersect(PSISide("a", a), PSISide("b", b))
        seconds.append(time.perf_counter() - start)
    assert len(a_rows) == len(b_rows) == ids - ids // 2
    crossing = 4 * ids * 32  # two offers and two answers of 32-byte values
    return {"benchmark": "psi", "ids": ids, "seconds": statistics.median(seconds), "protocol": PROTOCOL,
            "shared": int(len(a_rows)), "bytes": crossing, "repeats": repeats}  # fmt: skip


def report(records: list[dict]) -> str:
    lines = ["| IDs per side | protocol | seconds (median) | bytes crossing | target |", "|---|---|---|---|---|"]
    for r in records:
        target = TARGETS.get(r["ids"])
        met = "—" if target is None else f"≤ {target:g} s: {'met' if r['seconds'] <= target else 'NOT met'}"
        lines.append(f"| {r['ids']:,} | {r['protocol']} | {r['seconds']:.2f} | {r['bytes']:,} | {met} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="10^3, 10^4 and 10^5 IDs per side")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    p.add_argument("--repeats", type=int, default=3, help="runs per size (the median is kept)")
    args = p.parse_args()
    sizes = [10**3, 10**4, 10**5] + ([] if args.quick else [10**6])
    records = [one(n, args.repeats if n < 10**6 else 1) for n in sizes]
    write_records(records, args.out)
    print(report(records))


if __name__ == "__main__":
    main()
