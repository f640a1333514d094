import numpy as np
import pytest
import torch
from vcl.callbacks import RoundCallback

from vcl.config import RunConfig


class Crash(RoundCallback):
    """Interrupts a run at the end of round ``at``, as a killed job would."""

    def __init__(self, at):
        self.at = at

    def on_round_end(self, run, record):
        if record["round"] == self.at:
            raise KeyboardInterrupt("simulated crash")


@pytest.fixture
def crash_at():
    return Crash


@pytest.fixture
def tiny(tmp_path):
    """A small, fast run config writing under tmp_path."""

    def make(**overrides) -> RunConfig:
        values = {
            "data.dataset": "wine",
            "data.organizations": 4,
            "run.rounds": 3,
            "learner.epochs": 20,
            "learner.milestones": [10],
            "compare": [],
            "out": str(tmp_path / "run"),
            "run.device": "cpu",
            "run.audit": False,  # the audit of what the receivers kept: tests/test_audit.py turns it on
        }
        values.update(overrides)
        return RunConfig.from_dict(values)

    return make


def write_cifar_batches(root, per_batch=4, classes=4, seed=0):
    """CIFAR-10's python batches (data_batch_1..5, test_batch) with random images under ``root``."""
    import pickle

    base = root / "cifar-10-batches-py"
    base.mkdir(parents=True, exist_ok=True)
    rng = np.random.RandomState(seed)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        labels = [i % classes for i in range(per_batch)]
        entry = {"data": rng.randint(0, 256, size=(per_batch, 3072)).astype(np.uint8), "labels": labels}
        (base / name).write_bytes(pickle.dumps(entry))


def write_csv(path, header, rows):
    path.write_text("\n".join([",".join(header)] + [",".join(str(v) for v in r) for r in rows]) + "\n")
    return path


@pytest.fixture
def signal_csvs(tmp_path):
    """Alice holds only noise; bob holds the signal. Returns the two file paths."""
    rng = np.random.RandomState(0)
    n = 120
    signal = rng.randn(n, 2)
    label = (signal[:, 0] + signal[:, 1] > 0).astype(int)
    noise = rng.randn(n, 2)
    ids = [f"p{i:03d}" for i in range(n)]
    alice = write_csv(
        tmp_path / "alice.csv",
        ["id", "a1", "a2", "label"],
        [(ids[i], noise[i, 0], noise[i, 1], label[i]) for i in range(n)],
    )
    order = rng.permutation(n)  # bob's rows come in another order: alignment is by ID
    bob = write_csv(tmp_path / "bob.csv", ["id", "b1", "b2"], [(ids[i], signal[i, 0], signal[i, 1]) for i in order])
    return [str(alice), str(bob)]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray instance for the whole pytest run (starting one takes seconds); every ray test joins it."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False, configure_logging=False)  # GPUs: all seen
    yield ray
    ray.shutdown()
