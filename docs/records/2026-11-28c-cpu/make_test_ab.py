"""`make test` of two checkouts, file by file, taking turns (the one that goes first alternates), so that a change
in the machine's speed falls on both alike: each test file's wall seconds and pytest's exit status, one JSON line
each. Each checkout runs with the same virtual environment, its own tree first on PYTHONPATH (its `vcl/models`,
`vcl/datamodules`, `vcl/callbacks` linked to the card's folders, as the editable install maps them).

    python make_test_ab.py OLD NEW > make_test_ab.jsonl
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

old, new = (Path(p) for p in sys.argv[1:3])
files = sorted({p.name for t in (old, new) for p in (t / "tests").glob("test_*.py")})
for i, name in enumerate(files):
    for tree in (old, new) if i % 2 == 0 else (new, old):
        if not (tree / "tests" / name).exists():
            continue
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"tests/{name}"],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            capture_output=True,
            text=True,
        )
        tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
        print(
            json.dumps(
                {
                    "file": name,
                    "tree": "old" if tree == old else "new",
                    "seconds": round(time.perf_counter() - start, 2),
                    "rc": proc.returncode,
                    "last": tail[0][:200] if tail else "",
                }
            ),
            flush=True,
        )
