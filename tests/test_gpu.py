"""CUDA: every protocol's tiny run on ``cuda``, concurrent CNNs equal sequential ones there, and the
mixed precisions. Marked ``gpu``; skipped on a machine without CUDA (``pytest -m gpu`` selects them)."""

import math

import pytest
import torch

from tests.helpers import TINY_CNN, TINY_MPDL
from vcl.config import RunConfig
from vcl.coordinator.runner import train

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

IMAGES = {**TINY_CNN, "learner.epochs": 3, "learner.batch_size": 32}
DC = dict(method="dc_smote", **{"dc.public_rows": 30, "dc.anchor_rows": 200, "dc.dim": 3, "dc.smote_k": 10})
MPDL = TINY_MPDL
RUNS = {
    "gal": {},
    "gal_dms_cnn": dict(IMAGES, **{"gal.dms": True}),
    "gal_mlp_lstm": {
        "data.dataset": "sequence_synthetic",
        "data.sequence_size": 200,
        "learner.model": ["lstm"],
        "learner.lstm_hidden": 8,
        "learner.epochs": 2,
    },
    "alone": dict(method="alone"),
    "joint": dict(method="joint"),
    "al": dict(method="al"),
    "late_cnn": dict(IMAGES, method="late"),
    "interm_cnn": dict(IMAGES, method="interm"),
    "ascii": dict(method="ascii", **{"data.organizations": 2, "learner.model": ["mlp"]}),
    "dc_smote": DC,
    "mpdl": dict(MPDL, method="mpdl"),
    "ftl": dict(MPDL, method="ftl"),
}


def config(tmp_path, device: str, **overrides) -> RunConfig:
    values = dict(
        **{
            "data.dataset": "wine",
            "data.organizations": 4,
            "run.rounds": 2,
            "learner.epochs": 20,
            "learner.milestones": [10],
            "run.device": device,
        },
        compare=[],
    )
    return RunConfig.from_dict({**values, "out": str(tmp_path / device.replace(":", "")), **overrides})


@pytest.mark.parametrize("name", list(RUNS))
def test_every_protocol_runs_on_cuda(tmp_path, name):
    results = train(config(tmp_path, "cuda", **RUNS[name]), verbose=False, write=False)
    assert all(math.isfinite(r["metrics"]["test"]) for r in results["rounds"])
    assert results["rounds"][-1]["round"] >= 1


def test_gal_on_cuda_matches_cpu(tmp_path):
    """Linear organizations on wine: the same run on both devices ends at the same accuracy (float tolerance)."""
    cpu = train(config(tmp_path, "cpu", **{"run.rounds": 3}), verbose=False, write=False)
    gpu = train(config(tmp_path, "cuda", **{"run.rounds": 3}), verbose=False, write=False)
    for a, b in zip(cpu["rounds"], gpu["rounds"], strict=True):
        assert abs(a["metrics"]["test"] - b["metrics"]["test"]) <= 0.06
        assert a["bytes_sent"] == b["bytes_sent"]


@pytest.mark.parametrize(
    "kind,k,loss", [("classification", 4, "ce"), ("regression", 1, "l1"), ("regression", 2, "mse")]
)
def test_alices_line_and_weights_on_cuda_equal_the_cpu(kind, k, loss):
    """The line search's loss along the line (torch on the device, NumPy on the CPU) and the ℓ₂ weights."""
    from vcl.engine.tasks import Task
    from vcl.methods.gal.assistance import assistance_weights

    task, g = Task(kind, k, loss), torch.Generator().manual_seed(5)
    F, d = torch.randn(60, k, generator=g) * 2, torch.randn(60, k, generator=g)
    y = torch.randint(0, k, (60,), generator=g) if kind == "classification" else torch.randn(60, k, generator=g)
    cpu, gpu = task.along(F, d, y), task.along(F.cuda(), d.cuda(), y.cuda())
    for eta in (-3.0, 0.0, 0.7, 14.0):
        assert gpu(eta) == pytest.approx(cpu(eta), rel=1e-10, abs=1e-12)
    outputs = torch.randn(5, 60, k, generator=g)
    w_gpu = assistance_weights(outputs.cuda(), F.cuda(), "l2")
    assert w_gpu.device.type == "cuda"
    torch.testing.assert_close(w_gpu.cpu(), assistance_weights(outputs, F, "l2"))


def test_concurrent_cnns_equal_sequential_on_cuda(tmp_path):
    a = train(config(tmp_path, "cuda", **IMAGES, **{"run.concurrent": True}), verbose=False, write=False)
    b = train(config(tmp_path, "cuda", **IMAGES, **{"run.concurrent": False}), verbose=False, write=False)
    for ra, rb in zip(a["rounds"], b["rounds"], strict=True):
        assert abs(ra["metrics"]["test"] - rb["metrics"]["test"]) <= 0.02


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
@pytest.mark.parametrize("engine", ["fast", "trainer"])
def test_mixed_precision_cnns_learn_on_cuda(tmp_path, precision, engine):
    results = train(
        config(
            tmp_path, "cuda", **{**IMAGES, "learner.epochs": 4}, **{"run.precision": precision, "run.engine": engine}
        ),
        verbose=False,
        write=False,
    )
    tests = [r["metrics"]["test"] for r in results["rounds"]]
    assert all(math.isfinite(t) for t in tests) and tests[-1] > tests[0] + 0.2  # round 0 is the prior


def test_ray_parties_on_a_shared_gpu_equal_one_process_there(tmp_path, ray_cluster):
    """Four CNN organizations as Ray actors holding a quarter of the GPU each, against the local sequential
    reference on the same GPU (equal to float tolerance: kernels may differ between processes)."""
    if ray_cluster.cluster_resources().get("GPU", 0) < 1:
        pytest.skip("the test's Ray instance sees no GPU")
    base = dict(IMAGES, **{"run.rounds": 2, "run.device": "cuda", "run.seed": 0}, compare=[])
    local = train(RunConfig.from_dict(dict(base, **{"run.concurrent": False}, out=str(tmp_path / "l"))), verbose=False)
    ray_run = train(
        RunConfig.from_dict(
            dict(base, **{"transport.kind": "ray", "transport.party_gpus": [0.25]}, out=str(tmp_path / "r"))
        ),
        verbose=False,
    )
    assert all(p["device"].startswith("cuda") for p in ray_run["parties"])
    assert ray_run["bytes_sent"] == local["bytes_sent"]
    for a, b in zip(ray_run["rounds"], local["rounds"], strict=True):
        assert a["metrics"]["test"] == pytest.approx(b["metrics"]["test"], abs=0.02)
