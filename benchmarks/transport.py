"""Transport cost: seconds and bytes per round, local vs ray vs grpc, each transport's per-message overhead, and
the grpc party's answers to refused cases.

GAL on wine (Linear organizations, M = 2, 4, 8) and on the MNIST subset (small CNNs, M = 4, 8), each run
with ``transport: local`` (concurrent and sequential fits), ``transport: ray`` (one actor per party) and
``transport: grpc`` (one ``python -m vcl.party`` process per party on 127.0.0.1, mutual TLS), side by side in one
process; medians over seeds. ``start-up s`` is the whole run's wall time minus its rounds (data, parties, Ray
actors or party processes building their parties). Bytes per round must be equal across transports.
On a GPU machine (``--device cuda``) the ray rows give each CNN organization ``1/M`` of one GPU.
``transport_security`` records: what a grpc party does with a client of another CA (``wrong_ca``), a party
address whose certificate names another party (``wrong_name``), a plaintext client (``plaintext``), a frame
over its size limit (``oversize``) and a malformed frame (``malformed``): refused, and still serving after.

    python benchmarks/transport.py --quick --out runs/bench/transport.json
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import add_cluster_args, write_records

from vcl.config import RunConfig
from vcl.coordinator.runner import train
from vcl.coordinator.sweep import seconds_per_round
from vcl.methods.messages import ModelsRequest

SETTINGS = {
    "wine": {"data.dataset": "wine", "learner.model": ["linear"], "learner.epochs": 100},
    "mnist_subset": {
        "data.dataset": "mnist_subset",
        "learner.model": ["cnn"],
        "learner.cnn_widths": [8, 16],
        "learner.epochs": 2,
        "data.max_train": 1000,
    },
}


def parse_args():
    import argparse

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="wine M = 2, 4, 8 and the MNIST subset M = 4; 3 rounds")
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="run seeds (quick: 0; full: 0 1 2)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (the ray rows then share one GPU)")
    return add_cluster_args(p).parse_args()


def cells(quick: bool):
    for m in (2, 4, 8):
        yield "wine", m
    for m in (4,) if quick else (4, 8):
        yield "mnist_subset", m


def one_run(name: str, m: int, seed: int, rounds: int, device: str, transport: str, concurrent: bool, fed=None) -> dict:
    values = {
        **SETTINGS[name],
        "data.organizations": m,
        "run.seed": seed,
        "run.rounds": rounds,
        "compare": [],
        "run.device": device,
    }
    values |= {"transport.kind": transport, "run.concurrent": concurrent}
    if transport == "ray" and device.startswith("cuda"):
        values |= {"transport.party_gpus": [1.0 / m], "transport.party_cpus": [1.0]}
    if transport == "grpc":
        values |= fed.overrides(["alice"] + [f"org{k}" for k in range(1, m)])
    start = time.perf_counter()
    res = train(RunConfig.from_dict(values), verbose=False, write=False)
    wall = time.perf_counter() - start
    label = transport if transport != "local" else f"local ({'concurrent' if concurrent else 'sequential'})"
    record = {
        "benchmark": "transport",
        "dataset": name,
        "method": "gal",
        "model": SETTINGS[name]["learner.model"][0],
        "organizations": m,
        "seed": seed,
        "transport": label,
        "value": res["value"],
        "seconds_per_round": seconds_per_round(res),
        "startup_seconds": wall - res["seconds"],
        "bytes_per_round": res["bytes_sent"] / rounds,
        "bytes_sent": res["bytes_sent"],
    }
    print(
        f"{name} M={m} seed={seed} {label}: {record['seconds_per_round']:.3f} s/round, start-up "
        f"{record['startup_seconds']:.1f} s, {record['bytes_per_round']:.0f} B/round, value {res['value']:.4f}",
        flush=True,
    )
    return record


def message_overhead(fed, calls: int = 200) -> dict:
    """Seconds per request/reply of a tiny message (a ModelsRequest), one party, local vs ray vs grpc."""
    from vcl.coordinator.assembly import build_protocol, coordinator_data, datamodule_for

    out = {}
    for transport in ("local", "ray", "grpc"):
        values = {"data.organizations": 2, "compare": [], "run.device": "cpu", "transport.kind": transport}
        cfg = RunConfig.from_dict(values | (fed.overrides(["alice", "org1"]) if transport == "grpc" else {}))
        if transport != "local":
            data = coordinator_data(cfg)
        else:
            dm = datamodule_for(cfg)
            dm.setup()
            data = dm.data
        fed_ = build_protocol(cfg, data).federation
        try:
            fed_.request("org1", ModelsRequest("alice", "org1", 0))  # a first call opens the connection
            start = time.perf_counter()
            for _ in range(calls):
                fed_.request("org1", ModelsRequest("alice", "org1", 0))
            out[transport] = (time.perf_counter() - start) / calls
        finally:
            fed_.close()
    return out


def table(records: list[dict]) -> str:
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["dataset"], r["organizations"], r["transport"]), []).append(r)
    lines = [
        "| dataset | M | transport | s/round (median) | start-up s (median) | bytes/round | value (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (ds, m, transport), rs in groups.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("seconds_per_round", "startup_seconds", "value")}
        lines.append(
            f"| {ds} | {m} | {transport} | {med['seconds_per_round']:.3f} | {med['startup_seconds']:.1f} "
            f"| {rs[0]['bytes_per_round']:.0f} | {med['value']:.4f} |"
        )
    return "\n".join(lines)


def report(records: list[dict]) -> str:
    """The table, the per-message overhead, the bytes check and the refused cases, from this benchmark's records."""
    runs = [r for r in records if "message_seconds" not in r and r.get("benchmark") == "transport"]
    lines = [table(runs)]
    for r in records:
        if "message_seconds" in r:
            o = r["message_seconds"]
            line = (
                f"\nper request/reply of a tiny message: local {o['local'] * 1e6:.0f} µs, ray {o['ray'] * 1e3:.2f} ms"
            )
            line += f" ({o['ray'] / o['local']:.0f}x)"
            if "grpc" in o:
                line += f", grpc {o['grpc'] * 1e3:.2f} ms ({o['grpc'] / o['local']:.0f}x)"
            lines.append(line)
    same = {(r["dataset"], r["organizations"], r["seed"]): set() for r in runs}
    for r in runs:
        same[(r["dataset"], r["organizations"], r["seed"])].add(r["bytes_per_round"])
    lines.append(f"bytes per round equal across transports: {all(len(v) == 1 for v in same.values())}")
    security = [r for r in records if r.get("benchmark") == "transport_security"]
    if security:
        lines += ["", "| grpc party (vcl.testing.probes), case | refused | still serving | "
                  "party's peak MB before → after |",
                  "|---|---|---|---|"]  # fmt: skip
        lines += [
            f"| {r['case']} | {r['refused']} | {r['still_serving']} | "
            + (f"{r['peak_mb_before']:.0f} → {r['peak_mb_after']:.0f} |" if "peak_mb_after" in r else "|")
            for r in security
        ]
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    if args.workers != 1 or args.ray_address:
        print(
            "error: transport.py times runs side by side, and runs spread over --workers or a cluster would "
            "share machines and distort the timings; run it without --workers / --ray-address.",
            file=sys.stderr,
        )
        sys.exit(2)
    from vcl.transports.loopback import LoopbackFederation

    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    rounds = 3 if args.quick else 5
    records = []
    names = ["alice"] + [f"org{k}" for k in range(1, 8)]
    with tempfile.TemporaryDirectory() as folder, LoopbackFederation(Path(folder), names) as fed:
        for name, m in cells(args.quick):
            for seed in seeds:
                for transport, concurrent in (("local", True), ("local", False), ("ray", False), ("grpc", False)):
                    records.append(one_run(name, m, seed, rounds, args.device, transport, concurrent, fed))
        records.append({"benchmark": "transport", "message_seconds": message_overhead(fed)})
    from vcl.testing.probes import NAMES, PROBED, probe_all

    with tempfile.TemporaryDirectory() as folder, LoopbackFederation(Path(folder), NAMES, own={"org1": PROBED}) as fed:
        for record in probe_all(fed):
            records.append(record)
            peak = f"peak {record['peak_mb_before']} -> {record['peak_mb_after']} MB"
            print(f"transport_security {record['case']}: refused {record['refused']}, still serving "
                  f"{record['still_serving']}, {peak}")  # fmt: skip
    write_records(records, args.out)
    print(report(records))


if __name__ == "__main__":
    main()
