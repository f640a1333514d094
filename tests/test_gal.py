"""GAL and its baselines end to end: the boundary, the comparison, resume, concurrency."""

import json
import math
from pathlib import Path

import pytest
import torch
from vcl.datamodules import TabularDataModule

from vcl.config import RunConfig
from vcl.coordinator.assembly import build_protocol
from vcl.coordinator.runner import train
from vcl.methods.assisted import fit_seconds
from vcl.methods.messages import FittedValues, PseudoResidual


def test_no_raw_feature_ever_appears_in_a_message(tiny):
    cfg = tiny(**{"data.organizations": 4, "run.rounds": 2, "learner.model": ["linear", "mlp", "gb", "svm"]})
    dm = TabularDataModule("wine", organizations=4, feature_seed=cfg.run.seed)
    dm.setup()
    protocol = build_protocol(cfg, dm.data)
    sent = []
    protocol.federation.channel.tap = lambda m: sent.append(m) or m
    for _ in range(2):
        protocol.run_round()
    raw = [col for v in dm.data.views for x in v.splits.values() for col in x.T]
    assert {type(m) for m in sent} == {PseudoResidual, FittedValues}
    for message in sent:
        for tensor in message.payload().values():
            for col in tensor.T:
                assert not any(col.shape == r.shape and torch.allclose(col, r, atol=1e-4) for r in raw)
    # Alice -> 3 others and back, each N x K float32, 2 rounds (Alice's self-messages are not sent)
    n, k = dm.data.labels["train"].shape[0], 3
    out = 3 * n * k * 4
    back = 3 * 4 * k * sum(y.shape[0] for y in dm.data.labels.values())
    assert protocol.federation.channel.bytes_by_round() == {1: out + back, 2: out + back}


def test_gal_beats_alone_when_alice_holds_no_signal(tiny, signal_csvs):
    cfg = tiny(
        **{"data.dataset": "csv", "data.csv_files": signal_csvs, "data.task": "classification", "run.rounds": 4},
        compare=["alone", "joint"],
    )
    results = train(cfg, verbose=False)
    assert results["value"] >= 0.85
    assert results["compare"]["alone"]["value"] <= 0.7
    assert results["value"] >= results["compare"]["joint"]["value"] - 0.1


def test_gal_on_regression_lowers_mad_below_the_mean_predictor(tiny):
    results = train(tiny(**{"data.dataset": "diabetes", "run.rounds": 3}, compare=["alone"]), verbose=False)
    mads = [r["metrics"]["test"] for r in results["rounds"]]
    assert mads[-1] < 0.8 * mads[0]


def test_concurrent_organizations_match_sequential_run(tiny):
    a = train(tiny(**{"run.concurrent": True}), verbose=False, write=False)
    b = train(tiny(**{"run.concurrent": False}), verbose=False, write=False)
    for ra, rb in zip(a["rounds"], b["rounds"], strict=True):
        assert ra["metrics"] == pytest.approx(rb["metrics"], abs=1e-6)
        assert ra["train_loss"] == pytest.approx(rb["train_loss"], rel=1e-4)


@pytest.mark.slow
def test_resume_equals_uninterrupted_run(tiny, tmp_path, crash_at):
    full = train(tiny(**{"run.rounds": 4}, out=str(tmp_path / "full")), verbose=False)
    cfg = tiny(**{"run.rounds": 4}, out=str(tmp_path / "cut"))
    from vcl.callbacks import RoundCheckpoint

    with pytest.raises(KeyboardInterrupt):
        train(cfg, verbose=False, callbacks=[RoundCheckpoint(), crash_at(2)])
    assert not (tmp_path / "cut" / "results.json").exists()  # a failed run leaves no results
    resumed = train(cfg, resume=True, verbose=False)
    assert [r["metrics"] for r in resumed["rounds"]] == [r["metrics"] for r in full["rounds"]]
    assert [r["eta"] for r in resumed["rounds"][1:]] == [r["eta"] for r in full["rounds"][1:]]
    assert resumed["bytes_sent"] == full["bytes_sent"]
    on_disk = json.loads((tmp_path / "cut" / "results.json").read_text())
    assert on_disk["value"] == full["value"]
    # each organization's own TensorBoard log (where it runs): its local training loss, once per round
    assert party_losses(tmp_path / "cut") == party_losses(tmp_path / "full")
    assert all(steps == [1, 2, 3, 4] for steps, _ in party_losses(tmp_path / "full").values())


@pytest.mark.slow
def test_a_run_in_the_blocks_order_is_its_seeds_and_resumes_exactly(tiny, tmp_path, crash_at):
    """learner.shuffle blocks: two runs from one seed are one; one stopped after round 2 resumes to the same end."""
    from vcl.callbacks import RoundCheckpoint

    over = {"run.rounds": 3, "learner.shuffle": "blocks", "learner.batch_size": 32}
    full = train(tiny(**over, out=str(tmp_path / "full")), verbose=False)
    again = train(tiny(**over, out=str(tmp_path / "again")), verbose=False, write=False)
    assert [r["metrics"] for r in again["rounds"]] == [r["metrics"] for r in full["rounds"]]
    cfg = tiny(**over, out=str(tmp_path / "cut"))
    with pytest.raises(KeyboardInterrupt):
        train(cfg, verbose=False, callbacks=[RoundCheckpoint(), crash_at(2)])
    resumed = train(cfg, resume=True, verbose=False)
    assert [r["metrics"] for r in resumed["rounds"]] == [r["metrics"] for r in full["rounds"]]
    assert [r["eta"] for r in resumed["rounds"][1:]] == [r["eta"] for r in full["rounds"][1:]]
    rows = train(tiny(**{**over, "learner.shuffle": "rows"}, out=str(tmp_path / "rows")), verbose=False, write=False)
    assert [r["eta"] for r in rows["rounds"][1:]] != [r["eta"] for r in full["rounds"][1:]]


def party_losses(run: Path) -> dict[str, tuple[list[int], list[float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = {}
    for folder in sorted((run / "parties").glob("*/tensorboard")):
        events = EventAccumulator(str(folder)).Reload().Scalars("local_loss/train")
        out[folder.parent.name] = ([e.step for e in events], [e.value for e in events])
    assert out and all(v >= 0 for _, values in out.values() for v in values)
    return out


def test_more_rounds_on_resume_extend_the_run(tiny, tmp_path):
    cfg = tiny(**{"run.rounds": 2})
    train(cfg, verbose=False)
    cfg.run.rounds = 3
    extended = train(cfg, resume=True, verbose=False)
    assert [r["round"] for r in extended["rounds"]] == [0, 1, 2, 3]
    assert len(extended["round_seconds"]) == 3 and min(extended["round_seconds"]) > 0  # the first run's two kept


@pytest.mark.parametrize("method", ["al", "joint", "late", "alone"])
def test_baselines_run_and_learn(tiny, method):
    results = train(tiny(method=method, **{"run.rounds": 2}), verbose=False, write=False)
    assert results["value"] > 0.7  # wine: far above the 0.40 of predicting the most frequent class


def test_al_modes_differ_as_described():
    base = {
        "data.dataset": "wine",
        "data.organizations": 4,
        "run.rounds": 2,
        "learner.epochs": 20,
        "learner.milestones": [10],
        "compare": [],
        "method": "al",
        "run.device": "cpu",
    }
    dm = TabularDataModule("wine", organizations=4)
    dm.setup()
    chained = build_protocol(RunConfig.from_dict(base), dm.data)
    authors = build_protocol(RunConfig.from_dict({**base, "gal.al_mode": "authors"}), dm.data)
    rc, ra = chained.run_round(), authors.run_round()
    assert rc["weights"] == [1.0] * 4 and len(rc["eta"]) == 4  # one step per organization
    assert ra["weights"] == [0.0, 0.0, 0.0, 1.0] and ra["eta"] == 1.0  # only the last one is kept
    assert chained.train_loss() < authors.train_loss()


def test_a_round_records_each_organizations_seconds_and_alices(tiny):
    """GAL's Table 14 from a round record: each organization's own fit seconds (its reply says them), Alice's
    seconds outside the fits, and the exchanges a round takes (AL: one per organization, in turn)."""
    for method, exchanges in (("gal", 1), ("al", 4)):
        cfg = tiny(method=method, **{"data.organizations": 4, "run.rounds": 1, "run.concurrent": False})
        record = train(cfg, verbose=False, write=False)["rounds"][1]
        assert len(record["fit_seconds"]) == 4 and all(s > 0 for s in record["fit_seconds"])
        assert 0 <= record["alice_seconds"] < sum(record["fit_seconds"]) * 10 and record["exchanges"] == exchanges
    for said in ("1.5", -1.0, float("nan"), True, None):  # a reply's seconds that are not a number >= 0
        assert math.isnan(fit_seconds(FittedValues("org1", "alice", 1, {}, seconds=said)))
    assert fit_seconds(FittedValues("org1", "alice", 1, {}, seconds=2)) == 2.0


def test_bag_weights_are_uniform_and_eta_cap_applies(tiny):
    dm = TabularDataModule("wine", organizations=4)
    dm.setup()
    p = build_protocol(
        tiny(**{"gal.weights": "bag", "gal.eta": "constant", "gal.eta_value": -5.0, "gal.eta_cap": 2.0}), dm.data
    )
    record = p.run_round()
    assert record["weights"] == [0.25] * 4 and record["eta"] == 2.0


def test_mixed_learners_gb_svm(tiny):
    cfg = tiny(**{"data.organizations": 4, "learner.model": ["gb-svm"], "run.rounds": 2})
    dm = TabularDataModule("wine", organizations=4)
    dm.setup()
    p = build_protocol(cfg, dm.data)
    assert [p.federation.transport.party(n).learner_name for n in p.federation.names] == ["gb", "gb", "svm", "svm"]
    p.run_round()
    assert p.evaluate()["test"] > 0.7


def test_per_organization_local_losses_reach_their_learners(tiny):
    cfg = tiny(**{"data.organizations": 4, "gal.local_loss": ["l1", "l2", "l1.5", "l4"], "run.rounds": 1})
    dm = TabularDataModule("wine", organizations=4)
    dm.setup()
    p = build_protocol(cfg, dm.data)
    p.run_round()
    used = [p.federation.transport.party(n).kept_models()[0][1].hparams.loss for n in p.federation.names]
    assert used == ["l1", "l2", "l1.5", "l4"]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["gal", "al", "late"])
def test_prediction_stage_on_new_rows_matches_training_time_outputs(tiny, method):
    """Algorithm 1's prediction stage from checkpointed organization models equals the running F."""
    cfg = tiny(method=method, **{"data.organizations": 3, "learner.model": ["linear", "gb", "mlp"], "run.rounds": 2})
    dm = TabularDataModule("wine", organizations=3, feature_seed=cfg.run.seed)
    dm.setup()
    trained = build_protocol(cfg, dm.data)
    while trained.round < (trained.max_rounds or cfg.run.rounds):
        trained.run_round()
    restored = build_protocol(cfg, dm.data)  # as after a restart: state from the checkpoint only
    restored.load_state_dict(trained.state_dict())
    for name, view in zip(restored.federation.names, dm.data.views, strict=True):
        restored.federation.transport.party(name).add_rows("new", view.splits["test"])  # its own new rows
    torch.testing.assert_close(restored.predict("new"), trained.F["test"], rtol=1e-4, atol=1e-4)


def test_early_stop_on_small_eta(tiny):
    results = train(tiny(**{"run.rounds": 5, "gal.early_stop_eta": 1e9}), verbose=False)
    assert [r["round"] for r in results["rounds"]] == [0, 1]


def test_late_fusion_sums_or_averages_the_organizations_outputs(tiny):
    from vcl.coordinator.assembly import check_config
    from vcl.errors import VCLInputError

    assert RunConfig().gal.late_fusion == "mean"  # the authors' code, which gives the paper's Late figures
    dm = TabularDataModule("wine", organizations=4)
    dm.setup()
    fused = {}
    for fusion in ("mean", "sum"):
        p = build_protocol(tiny(method="late", **{"gal.late_fusion": fusion}), dm.data)
        record = p.run_round()
        assert record["coefficients"] == ([0.25] * 4 if fusion == "mean" else [1.0] * 4)
        fused[fusion] = p
    torch.testing.assert_close(fused["sum"].F["test"], 4 * fused["mean"].F["test"], rtol=1e-5, atol=1e-5)
    assert fused["sum"].evaluate() == fused["mean"].evaluate()  # the same classes: accuracy is equal
    assert fused["sum"].train_loss() != pytest.approx(fused["mean"].train_loss(), rel=1e-3)  # sharper softmax
    torch.testing.assert_close(fused["sum"].predict("test"), fused["sum"].F["test"], rtol=1e-4, atol=1e-4)
    with pytest.raises(VCLInputError, match="late_fusion"):
        check_config(tiny(method="late", **{"gal.late_fusion": "max"}))


@pytest.mark.parametrize(
    "settings",
    [{"learner.model": ["linear"]}, {"learner.model": ["mlp"]},
     {"learner.model": ["cnn"], "data.dataset": "digits_image", "learner.cnn_widths": [4, 8, 8, 8],
      "learner.epochs": 2}],
    ids=["linear", "mlp", "cnn"],
)  # fmt: skip
def test_a_batch_of_organizations_answers_and_keeps_as_each_alone(tiny, settings):
    """The party contract's entry for a batch (``Organization.handle_batch``, one vmapped fit): every reply and every
    kept round model equal each organization's own ``handle`` alone (to float rounding: the stacked kernels add in
    another order), two rounds running."""
    from vcl.coordinator.runner import run_data
    from vcl.family import family_of
    from vcl.methods.messages import PredictionRequest
    from vcl.methods.organization import Organization

    config = tiny(**settings)
    data = run_data(config)
    family = family_of(config, "gal")
    alone, batch = (family.parties(config, "gal", data) for _ in range(2))
    rows = len(data.labels["train"])
    for round_ in (1, 2):
        residual = torch.randn(rows, 3, generator=torch.Generator().manual_seed(round_))
        asked = [PseudoResidual("alice", p.name, round_, residual) for p in alone]
        each = [p.handle(m) for p, m in zip(alone, asked, strict=True)]
        together = Organization.handle_batch(batch, asked)
        for a, b in zip(each, together, strict=True):
            assert (a.sender, a.round, sorted(a.values)) == (b.sender, b.round, sorted(b.values))
            for split in a.values:
                torch.testing.assert_close(a.values[split], b.values[split], rtol=1e-4, atol=1e-5)
    for a, b in zip(alone, batch, strict=True):  # the kept models: the prediction stage's outputs of each round
        ask = PredictionRequest("alice", a.name, 2, "test")
        kept_a, kept_b = a.handle(ask).values, b.handle(ask).values
        assert sorted(kept_a) == sorted(kept_b) == ["1", "2"]
        for t in kept_a:
            torch.testing.assert_close(kept_a[t], kept_b[t], rtol=1e-4, atol=1e-5)
        assert a.train_losses == pytest.approx(b.train_losses, rel=1e-4)
