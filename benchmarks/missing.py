#!/usr/bin/env python
"""What each organization is worth to Alice: GAL's test metric when one organization's models are missing at
prediction (it is down: ``run.missing_parties: skip``), beside the metric with all present.

    python benchmarks/missing.py --quick --out missing_quick.json    # wine and diabetes, seed 0 (under a minute)
    python benchmarks/missing.py --out missing.json                  # the GAL UCI tables' data sets, seeds 0-3

Each run is GAL with the default settings (8 Linear organizations, 10 rounds); after its last round the prediction
stage runs once per organization left out (``Protocol.predict(split, upto, without=(m,))``: the sum of Algorithm 1's
prediction stage over the organizations present, with the η and weights the run learned; nothing is refitted).
"""

from __future__ import annotations

import statistics
import time

from common import parse_args, write_records
from vcl.callbacks import RoundCallback

from vcl.config import RunConfig
from vcl.coordinator.runner import train

DATASETS = ["diabetes", "boston", "blob", "iris", "wine", "breast_cancer"]


class LeaveOneOut(RoundCallback):
    """After the run: the test metric at the reported round with each organization's models left out."""

    def on_run_end(self, run, results):
        protocol, upto = run.protocol, results["prediction_stage_round"]
        y = protocol.labels["test"]
        self.without = {
            name: protocol.task.metric(protocol.predict("test", upto=upto, without=(m,)), y)
            for m, name in enumerate(protocol.federation.names)
        }


ORGANIZATIONS = {"iris": 4}  # iris has 4 features (the GAL paper's iris tables stop at M = 4); the others 8


def one(dataset: str, seed: int) -> dict:
    m = ORGANIZATIONS.get(dataset, 8)
    config = RunConfig.from_dict(
        {"data.dataset": dataset, "data.organizations": m, "run.seed": seed, "compare": [], "run.device": "cpu"}
    )
    probe = LeaveOneOut()
    start = time.perf_counter()
    results = train(config, verbose=False, callbacks=[probe], write=False)
    return {
        "dataset": dataset,
        "seed": seed,
        "organizations": results["organizations"],
        "metric": results["metric"],
        "all_present": results["prediction_stage"]["test"],
        "without": probe.without,
        "seconds": time.perf_counter() - start,
    }


def report(records: list[dict]) -> str:
    """Per data set, the mean over seeds: all present, then each organization missing (Alice is organization 0)."""
    every = max((r["organizations"] for r in records), key=len)
    lines = [
        "| data set | metric | seeds | all present | " + " | ".join(f"without {n}" for n in every) + " |",
        "|" + "---|" * (4 + len(every)),
    ]
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        rs = [r for r in records if r["dataset"] == dataset]
        names = rs[0]["organizations"]
        scale = 100.0 if rs[0]["metric"] == "accuracy" else 1.0
        unit = "accuracy %" if scale == 100.0 else rs[0]["metric"]
        cells = [_mean([r["all_present"] for r in rs], scale)]
        cells += [_mean([r["without"][n] for r in rs], scale) if n in names else "" for n in every]
        lines.append(f"| {dataset} | {unit} | {len(rs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _mean(values: list[float], scale: float) -> str:
    return f"{scale * statistics.mean(values):.1f}"


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    datasets, seeds = (["wine", "diabetes"], [0]) if args.quick else (DATASETS, args.seeds)
    records = [one(d, s) for d in datasets for s in seeds]
    print(report(records))
    write_records(records, args.out)


if __name__ == "__main__":
    main()
