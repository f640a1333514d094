"""A binary task's AUROC beside its accuracy: per round, in results.json (following the prediction stage where the
metrics do) and in TensorBoard; none for a task of more classes."""

import json

import pytest
import torch
from sklearn.metrics import roc_auc_score

import train as cli
from vcl.engine.tasks import Task

BINARY = Task("classification", 2, "ce")


def test_auroc_is_the_area_under_the_roc_curve_of_the_log_odds():
    g = torch.Generator().manual_seed(0)
    F, y = torch.randn(300, 2, generator=g), torch.randint(0, 2, (300,), generator=g)
    F[:, 1] += 1.5 * y  # informative, so the area is well above 0.5
    expected = roc_auc_score(y.numpy(), (F[:, 1] - F[:, 0]).numpy())
    assert BINARY.auroc(F, y) == pytest.approx(expected, abs=1e-6) and expected > 0.75
    shares = torch.softmax(F, 1)  # probabilities rank the rows as the logits do
    assert BINARY.auroc(shares, y) == pytest.approx(expected, abs=1e-6)
    assert BINARY.auroc(F, torch.ones(300)) is None  # one class: no curve
    with pytest.raises(ValueError, match="binary"):
        BINARY.auroc(torch.randn(300, 3), y)
    assert BINARY.binary and not Task("classification", 3, "ce").binary and not Task("regression", 1, "l1").binary


def _run(tmp_path, name, *extra):
    out = tmp_path / name
    argv = ["--out", str(out), "--run.device", "cpu", "--run.rounds", "2", "--learner.epochs", "10", *extra]
    assert cli.main(argv) == 0
    return out, json.loads((out / "results.json").read_text())


def test_a_binary_run_reports_auroc_per_round_in_results_and_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, results = _run(tmp_path, "bc", "--data.dataset", "breast_cancer", "--compare", "alone", "late")
    for method, res in [("gal", results), *results["compare"].items()]:
        rounds = res["rounds"]
        assert all(set(r["auroc"]) == set(r["metrics"]) for r in rounds), method
        assert rounds[0]["auroc"]["test"] == pytest.approx(0.5)  # F⁰ is one row for everyone: no ranking
        picked = next(r for r in rounds if r["round"] == res["value_round"])
        assert res["auroc"] == picked["auroc"] and 0.9 < res["auroc"]["test"] <= 1.0, method
        board = EventAccumulator(str(out / "tensorboard" / method)).Reload()
        logged = [e.value for e in board.Scalars("auroc/test")]
        assert len(logged) == len(rounds) and logged[-1] == pytest.approx(rounds[-1]["auroc"]["test"], abs=1e-6)


def test_gal_auroc_is_that_of_the_kept_models_through_the_prediction_stage(tmp_path):
    """GAL's reported rounds are recomputed from the models it keeps; the AUROC goes with them (with Deep Model
    Sharing Alice's round-time figures stay beside them)."""
    from vcl.config import RunConfig
    from vcl.coordinator.assembly import build_protocol, datamodule_for
    from vcl.coordinator.runner import Run, run_rounds

    cfg = RunConfig.from_dict({"data.dataset": "breast_cancer", "run.rounds": 2, "learner.epochs": 10,
                               "compare": [], "out": str(tmp_path / "k"), "run.device": "cpu"})  # fmt: skip
    dm = datamodule_for(cfg)
    dm.setup()
    protocol = build_protocol(cfg, dm.data)
    run = Run(cfg, protocol, cfg.run_dir, verbose=False)
    run_rounds(run, [], cfg.run.rounds)
    results = run.results({})
    fresh = {s: protocol.predict(s) for s in protocol.labels}
    assert results["rounds"][-1]["auroc"] == pytest.approx(protocol.auroc(fresh), abs=1e-12)


def test_a_task_of_more_classes_reports_no_auroc(tmp_path):
    _, results = _run(tmp_path, "wine", "--data.dataset", "wine", "--compare")
    assert "auroc" not in results and all("auroc" not in r for r in results["rounds"])
