"""The default job (`train.py`) and the import of torch and Lightning, in two checkouts taking turns (the one that
goes first alternates), one JSON line per process: what moving imports to the top of modules costs at start-up,
measured side by side because this machine's speed drifts by tens of percent within minutes.

    python startup_ab.py OLD NEW ROUNDS > startup_ab.jsonl
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

old, new, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
commands = {
    "import_lightning": [sys.executable, "-c", "import torch, pytorch_lightning"],
    "vcl_default": [sys.executable, "train.py", "--quiet", "--overwrite", "--run.device", "cpu", "--out"],
}
with tempfile.TemporaryDirectory() as out:
    for i in range(rounds):
        for tree in (old, new) if i % 2 == 0 else (new, old):
            for name, argv in commands.items():
                argv = argv + [f"{out}/{tree.name}"] if name == "vcl_default" else argv
                start = time.perf_counter()
                subprocess.run(argv, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, check=True,
                               capture_output=True)  # fmt: skip
                seconds = round(time.perf_counter() - start, 3)
                print(json.dumps({"tree": "old" if tree == old else "new", "command": name, "repeat": i,
                                  "seconds": seconds}), flush=True)  # fmt: skip
