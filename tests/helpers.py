"""Helpers the test modules share (imported as ``tests.helpers``, not from conftest)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from vcl.callbacks import RoundCallback

from vcl.testing.suite import assert_same_run, rounds_of  # noqa: F401  (what the test modules import from here)

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

# a tiny image run: digits as 4 patches, narrow CNNs, few epochs, 300 training images
TINY_CNN = {
    "data.dataset": "digits_image",
    "data.organizations": 4,
    "learner.model": ["cnn"],
    "learner.cnn_widths": [4, 8],
    "learner.epochs": 2,
    "learner.batch_size": 128,
    "data.max_train": 300,
}

# a tiny DC run: wine, 30 public rows, 100 anchor rows, 3 dimensions, one round
TINY_DC = {
    "data.dataset": "wine",
    "dc.public_rows": 30,
    "dc.anchor_rows": 100,
    "dc.dim": 3,
    "dc.smote_k": 10,
    "run.rounds": 1,
}

# a tiny MPDL run: breast cancer, 240 rows, few epochs
TINY_MPDL = {
    "data.dataset": "breast_cancer",
    "data.test_fraction": 0.1,
    "mpdl.gamma": 0.2,
    "mpdl.max_rows": 240,
    "mpdl.dual_epochs": 2,
    "mpdl.central_epochs": 3,
    **{"mpdl.secret_a": 0xA5EC, "mpdl.secret_b": 0xB5EC},  # the parties' own secrets, given: two runs draw alike
}


def benchmark(name: str):
    """A script of ``benchmarks/`` imported as a module, by its path, without putting ``benchmarks/`` on
    ``sys.path`` (``benchmarks/results.py`` knows how)."""
    if "results" not in sys.modules:
        spec = importlib.util.spec_from_file_location("results", BENCHMARKS / "results.py")
        sys.modules["results"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["results"])
    return sys.modules["results"].load(name)


def sigterm_after_first_checkpoint(args: list[str], out: Path) -> tuple[int, str, int]:
    """Run ``train.py args`` as its own process, send SIGTERM once ``out`` holds a checkpoint, and give its exit
    status, its stderr, and the number of round records in the checkpoint it left."""
    import signal
    import subprocess
    import time

    from vcl.storage.checkpoints import load_checkpoint

    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, str(root / "train.py"), "--out", str(out), *args]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ckpt = out / "checkpoints" / "last.ckpt"
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err, len(load_checkpoint(ckpt)["records"]) if ckpt.exists() else 0


class KillParty(RoundCallback):
    """Ends ``party``'s process of a :class:`vcl.transports.loopback.LoopbackFederation` at the end of round ``at``."""

    def __init__(self, at, federation, party):
        self.at, self.federation, self.party = at, federation, party

    def on_round_end(self, run, record):
        if record["round"] == self.at:
            self.federation.kill(self.party)


class Stop(RoundCallback):
    """Interrupts the run (as Ctrl-C would) at the end of round ``at``, after the callbacks before it."""

    def __init__(self, at):
        self.at = at

    def on_round_end(self, run, record):
        if record["round"] == self.at:
            raise KeyboardInterrupt


class Aborted(Exception):
    """A party server's ``context.abort`` in a unit test: its status code and details."""

    def __init__(self, code, details):
        super().__init__(details)
        self.code = code


class Context:
    """What a call's gRPC context gives the party's server: the caller's address, and abort."""

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def abort(self, code, details):
        raise Aborted(code, details)
