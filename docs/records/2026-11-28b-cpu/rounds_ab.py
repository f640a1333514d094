"""The same GAL run on two checkouts, taking turns: what `rounds_ab.jsonl` holds.

    python docs/records/2026-11-28b-cpu/rounds_ab.py ROWS PAIRS OLD NEW

OLD and NEW are checkouts (here: /tmp/base at ca70ccf, /tmp/after at a0be39c), each with the links
``vcl/models -> ../models``, ``vcl/datamodules -> ../datamodules``, ``vcl/callbacks -> ../callbacks`` so that a
process given ``PYTHONPATH=<checkout>`` imports that checkout's vcl. The files are ``benchmarks/scale.py``'s
(8 organizations, ROWS rows each, generated once); each run is ``train.py`` on them with Linear organizations, two
rounds and Alone beside GAL, in a process of its own; pair i runs OLD then NEW, or NEW then OLD, in turn.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from scale import generate  # noqa: E402

rows, pairs, trees = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:5]
folder = Path(f"/tmp/rounds_ab_files{rows}")
if not folder.exists():
    folder.mkdir(parents=True)
    generate(folder, rows)
files = sorted(str(p) for p in folder.glob("*.csv"))
for i in range(pairs):
    for tree in trees if i % 2 == 0 else trees[::-1]:
        out = f"/tmp/rounds_ab_run{trees.index(tree)}"
        argv = [sys.executable, "train.py", "--data.dataset", "csv", "--data.task", "classification",
                "--data.csv_files", *files, "--learner.model", "linear", "--run.rounds", "2", "--run.device", "cpu",
                "--out", out, "--overwrite", "--quiet"]  # fmt: skip
        start = time.perf_counter()
        subprocess.run(argv, cwd=tree, env={**os.environ, "PYTHONPATH": tree}, check=True, capture_output=True)
        wall = time.perf_counter() - start
        r = json.load(open(f"{out}/results.json"))
        gal, alone = r["round_seconds"], r["compare"]["alone"]["round_seconds"]
        print(json.dumps({"pair": i + 1, "checkout": tree, "wall_seconds": wall, "gal_round_1": gal[0],
                          "gal_round_2": gal[1], "alone_round_1": alone[0], "alone_round_2": alone[1],
                          "accuracy": r["value"]}), flush=True)  # fmt: skip
