"""Privacy measured alike (vcl.audit): what each receiver kept, the attacks on it beside their baselines, each noise's
budget by the accountant, and ``train.py audit`` on a run of every family."""

import json

import numpy as np
import pytest
import torch

import train as cli
from tests.helpers import TINY_DC, TINY_MPDL
from vcl.audit.attacks import (
    KNOWN,
    LABELS,
    Score,
    complete_model,
    counted,
    exposure,
    infer_features,
    infer_labels,
    invert_map,
)
from vcl.audit.budget import laplace_budget
from vcl.config import RunConfig
from vcl.coordinator.runner import train
from vcl.methods.messages import FittedValues, PseudoResidual
from vcl.storage.kept import read_kept


@pytest.fixture
def tiny(tiny):
    """conftest's small run, audited at its end (``run.audit``, which conftest's leaves off)."""
    return lambda **overrides: tiny(**{"run.audit": True, **overrides})


def by_attack(results: dict, attack: str, receiver: str | None = None, known: int = KNOWN) -> list[dict]:
    """The scores of ``attack`` (by ``receiver``) with ``known`` rows, or with none where it needs none."""
    return [a for a in results["privacy"]["attacks"]
            if a["attack"] == attack and receiver in (None, a["receiver"]) and a["known"] in (0, known)]  # fmt: skip


# --- the record each holder keeps ---------------------------------------------------------------------------------
def test_every_holder_keeps_what_crossed_its_boundary_and_a_resume_keeps_the_same(tiny, crash_at):
    from vcl.callbacks import RoundCheckpoint

    cfg = tiny(**{"gal.privacy": "residual_laplace", "gal.privacy_secret": 11})
    whole = train(cfg, verbose=False)
    kept = read_kept(cfg.run_dir / "parties" / "org1" / "messages")
    got = [m for _, d, m in kept if d == "in" and isinstance(m, PseudoResidual)]
    sent = [m for _, d, m in kept if d == "out" and isinstance(m, FittedValues)]
    assert [m.round for m in got] == [1, 2, 3] and [m.round for m in sent] == [1, 2, 3]
    assert set(sent[0].values) == {"train", "test"}
    alice = read_kept(cfg.run_dir / "messages")
    clean = {m.round: m.values for _, d, m in alice if d == "own"}  # Alice's clean residual, before her noise
    assert all(not torch.allclose(m.values, clean[m.round]) for m in got)
    replies = [m for _, d, m in alice if d == "in" and isinstance(m, FittedValues)]
    assert {m.sender for m in replies} == {"alice", "org1", "org2", "org3"}

    with pytest.raises(KeyboardInterrupt):
        train(cfg, verbose=False, overwrite=True, callbacks=[RoundCheckpoint(), crash_at(2)])
    resumed = train(cfg, verbose=False, resume=True)
    again = read_kept(cfg.run_dir / "parties" / "org1" / "messages")
    resent = [m.values for _, d, m in again if d == "in"]
    assert len(resent) == 3 and all(torch.equal(a, b.values) for a, b in zip(resent, got, strict=True))
    assert resumed["privacy"]["attacks"] == whole["privacy"]["attacks"]


def test_a_run_that_keeps_nothing_has_nothing_to_audit(tiny, capsys):
    cfg = tiny(**{"run.keep_messages": False, "run.rounds": 1})
    results = train(cfg, verbose=False)
    assert "privacy" not in results and not (cfg.run_dir / "messages").exists()
    assert not list((cfg.run_dir / "parties").rglob("*.vclw"))
    assert cli.main(["audit", "--out", str(cfg.run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kept no messages" in err and "run.keep_messages true" in err
    assert cli.main(["audit", "--out", str(cfg.run_dir / "nowhere")]) == 2
    assert "holds no results.json" in capsys.readouterr().err


# --- the attacks, each beside its baseline --------------------------------------------------------------------------
def test_the_attacks_learn_what_is_there_and_nothing_from_noise():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    y = (x[:, 0] + 0.1 * rng.normal(size=400) > 0).astype(int)
    score, _, majority = infer_labels(x, y, classes=True)
    assert score > 0.85 and 0.45 < majority < 0.6
    score, _, majority = infer_labels(rng.normal(size=(400, 3)), y, classes=True)
    assert score < majority + 0.1
    mae, _, mean_guess = infer_labels(x, 3 * x[:, 1], classes=False)
    assert mae < 0.1 * mean_guess
    mae, _, mean_guess = infer_features(x @ rng.normal(size=(3, 3)), x[:, :2])  # an invertible linear map of x
    assert mae < 0.05 and 0.7 < mean_guess < 0.9  # guessing the mean of a normal column: sqrt(2/pi) ≈ 0.8
    mae, _, mean_guess = infer_features(rng.normal(size=(400, 2)), x[:, :2])
    assert mae > 0.9 * mean_guess
    mae, _, mean_guess = infer_features(np.hstack([3 * x[:, :1], 1 - x[:, :1]]), x[:, :1])  # one column, GAL's M = 8
    assert mae < 1e-3 and mean_guess > 0.7
    anchor = rng.normal(size=(50, 3))
    v = rng.normal(size=(3, 3))
    mae, mean_guess = invert_map(anchor, anchor @ v + 1.0, x @ v + 1.0, x)  # a colluder's anchor: exact inversion
    assert mae < 1e-6 and mean_guess > 0.7
    own = x[:, 2:]  # the receiver's own column says nothing of y; its round outputs do
    split = slice(0, 300), slice(300, 400)
    outputs = x[:, :1] + 0.01 * rng.normal(size=(400, 1))
    score, alone, majority = complete_model(own[split[0]], outputs[split[0]], y[split[0]], own[split[1]],
                                            outputs[split[1]], y[split[1]], classes=True)  # fmt: skip
    assert score > 0.85 and alone < 0.7 and majority < 0.65


def test_a_learned_attack_is_held_to_the_attackers_own_data_alone():
    """The receiver's own columns predict the labels already; messages of noise add nothing: the attack on [own data,
    messages] scores near the own data alone, far above the majority rate, and its share (over the better baseline)
    is about 0. Messages that carry the label add what the own columns lack."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(600, 2))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(int)
    own = x[:, :1] + 0.3 * rng.normal(size=(600, 1))  # it knows much of y from its own column
    score, alone, majority = infer_labels(rng.normal(size=(600, 4)), y, True, 40, 0, own=own)
    noise = Score("label inference", "org1", "alice", "", "accuracy", score, majority, own=alone, secret=LABELS)
    assert alone > majority + 0.2 and abs(score - alone) < 0.1 and noise.share < 0.25 < noise.gain / (1 - majority)
    score, alone, majority = infer_labels(y[:, None] + 0.01 * rng.normal(size=(600, 1)), y, True, 40, 0, own=own)
    signal = Score("label inference", "org1", "alice", "", "accuracy", score, majority, own=alone, secret=LABELS)
    assert signal.share > 0.8


def test_the_score_counted_is_the_strongest_attack_on_each_pair_at_each_known_count():
    reading = Score("label reading", "org1", "alice", "", "accuracy", 0.9, 0.5, secret=LABELS)  # needs no known row
    learned = [Score("label inference", "org1", "alice", "", "accuracy", v, 0.5, own=0.6, known=k, secret=LABELS)
               for v, k in ((0.7, 10), (0.95, 40))]  # fmt: skip
    other = Score("label inference", "org2", "alice", "", "accuracy", 0.55, 0.5, own=0.5, known=40, secret=LABELS)
    features = Score("feature inference", "alice", "org1", "", "mae", 0.1, 0.8, own=0.4, known=40)
    pairs = {(p["receiver"], p["target"], p["secret"], p["known"]): p
             for p in counted([reading, *learned, other, features], (10, 40))}  # fmt: skip
    assert pairs["org1", "alice", "labels", 0]["attack"] == "label reading"
    assert pairs["org1", "alice", "labels", 10]["attack"] == "label reading"  # reading beats the 10-label attack
    assert pairs["org1", "alice", "labels", 40]["score"] == 0.95  # the 40-label attack beats reading
    assert pairs["org1", "alice", "labels", 40]["tried"] == ["label inference", "label reading"]
    assert ("org2", "alice", "labels", 10) not in pairs
    assert pairs["alice", "org1", "features", 40]["share"] == pytest.approx(0.75)
    [labels] = [e for e in exposure(list(pairs.values())) if e["secret"] == "labels" and e["known"] == 40]
    assert labels["worst"] == pytest.approx(0.875) and labels["worst_receiver"] == "org1"
    assert labels["mean"] == pytest.approx((0.875 + 0.1) / 2)  # org2's 0.55 over the majority's 0.5: 0.1


def test_the_counted_scores_of_a_run_are_the_maximum_over_its_attacks(tiny):
    """Label DP at ε = 1: reading the residual beats the learned attacks at every count of known rows, and is what
    counts; every counted pair is at least every attack run on it."""
    p = train(tiny(**{"gal.privacy": "dp", "gal.privacy_epsilon": 1.0, "gal.privacy_secret": 3}), verbose=False)
    p = p["privacy"]
    assert p["known_rows"] == [10, 40]
    for pair in p["counted"]:
        mine = [a for a in p["attacks"] if (a["receiver"], a["target"], a["secret"]) ==
                (pair["receiver"], pair["target"], pair["secret"]) and a["known"] in (0, pair["known"])]  # fmt: skip
        assert pair["share"] == max(a["share"] for a in mine) and pair["tried"]
    read = [c for c in p["counted"] if c["secret"] == "labels" and c["attack"] == "label reading"]
    assert {c["known"] for c in read} >= {0}


def test_holders_keep_one_sample_of_the_rows_and_the_audit_scores_those(tiny):
    cfg = tiny(**{"run.keep_rows": 50, "run.rounds": 2, "gal.privacy": "residual_laplace"})  # wine: 142 rows
    p = train(cfg, verbose=False)["privacy"]
    alice = read_kept(cfg.run_dir / "messages")
    org1 = read_kept(cfg.run_dir / "parties" / "org1" / "messages")
    sent = [m.values for _, d, m in alice if d == "out" and isinstance(m, PseudoResidual) and m.receiver == "org1"]
    got = [m.values for _, d, m in org1 if d == "in" and isinstance(m, PseudoResidual)]
    assert all(v.shape[0] == 50 for v in sent) and all(torch.equal(a, b) for a, b in zip(sent, got, strict=True))
    assert all(len(t) <= 50 for _, _, m in org1 if isinstance(m, FittedValues) for t in m.values.values())
    assert p["kept_rows"] == 50 and p["attacks"] and any("residual recovery" in n for n in p["not_attacked"])
    whole = train(tiny(**{"run.keep_rows": 0, "run.rounds": 2}), verbose=False, overwrite=True)["privacy"]
    assert whole["kept_rows"] == "all"


def test_the_accountant_composes_pure_laplace_over_the_rounds():
    # T releases of a Laplace mechanism with noise multiplier b are (T/b)-DP by basic composition (δ = 0); the PLD
    # accountant's ε at δ = 1e-5 is at most that and close to it for few rounds
    for rounds, multiplier in ((1, 1.0), (10, 1.0), (3, 2.0)):
        b = laplace_budget(multiplier, rounds)
        assert b["private"] and b["delta"] == 1e-5 and b["releases"] == rounds
        assert 0.9 * rounds / multiplier <= b["epsilon"] <= rounds / multiplier + 1e-3
    many = laplace_budget(10.0, 400)  # many small releases: the accountant beats basic composition (40)
    assert many["epsilon"] < 0.5 * 400 / 10.0
    assert not laplace_budget(0.0, 3)["private"]


# --- GAL: every attack beats its baseline without defence and falls to it under a strong one -------------------
def test_gal_audit_without_and_with_defence(tiny):
    plain = train(tiny(), verbose=False)
    p = plain["privacy"]
    assert p["label_attack_accuracy"] == 1.0 and 0 < p["label_majority_rate"] < 0.5  # wine: 3 classes
    assert list(p["label_attack_accuracy_by_round"].values()) == [1.0, 1.0, 1.0]
    assert all(a["score"] > a["baseline"] + 0.4 for a in by_attack(plain, "label inference"))
    assert all(a["score"] < 0.05 < 0.7 < a["baseline"] for a in by_attack(plain, "feature inference", "alice"))
    completion = by_attack(plain, "model completion")
    assert len(completion) == 3 and all(a["score"] > a["baseline"] for a in completion)
    assert all(a["beside"]["alice_model"] == plain["value"] for a in completion)
    assert p["budget"] == [{**p["budget"][0], "private": False}] and p["main_task"]["value"] == plain["value"]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = EventAccumulator(str(tiny().run_dir / "tensorboard" / "gal")).Reload().Tags()["scalars"]
    assert {
        "privacy/label_inference/org1_of_alice/40_known",
        "privacy/feature_inference/alice_of_org3/10_known/baseline",
        "privacy/label_reading/org1_of_alice",
        "privacy/share/labels/0_known/worst",
    } <= set(tags)

    strong = train(
        tiny(**{"gal.privacy": "residual_laplace", "gal.privacy_alpha": 0.01, "gal.privacy_secret": 3}),
        verbose=False,
        overwrite=True,
    )
    assert all(a["score"] <= max(a["baseline"], a["own"]) + 0.05 for a in by_attack(strong, "label inference"))
    assert strong["privacy"]["label_attack_accuracy"] < 0.5
    for a in by_attack(strong, "model completion"):  # what the run added to the organization's own columns: nothing
        assert a["score"] <= a["own"] + 0.05
    [budget] = strong["privacy"]["budget"]  # strong noise, but no guarantee for the data set: no ε
    assert not budget["private"] and "epsilon" not in budget and "moves every row" in budget["why"]
    assert not any(t.startswith("privacy/epsilon") for t in tags_of(tiny().run_dir))
    guaranteed = train(tiny(**{"gal.privacy": "dp", "gal.privacy_epsilon": 0.1, "gal.privacy_secret": 3}),
                       verbose=False, overwrite=True)  # fmt: skip
    assert guaranteed["privacy"]["label_attack_accuracy"] < 0.6  # randomized response keeps a label with p 0.37
    [budget] = guaranteed["privacy"]["budget"]
    assert budget["private"] and budget["releases"] == 1 and budget["epsilon"] == pytest.approx(0.1, rel=1e-2)
    assert "privacy/epsilon/randomized_response_on_the_labels,_once" in tags_of(tiny().run_dir)
    noisy = train(
        tiny(**{"gal.noisy_organizations": [1, 2, 3], "gal.noise_sigma": 100.0}), verbose=False, overwrite=True
    )
    assert all(a["score"] > 0.9 * min(a["baseline"], a["own"]) for a in by_attack(noisy, "feature inference", "alice"))
    regression = train(tiny(**{"data.dataset": "diabetes", "run.rounds": 1}), verbose=False, overwrite=True)
    assert not any(k.startswith("label_") for k in regression["privacy"])  # no class to read
    assert all(a["metric"] == "mae" and a["score"] < a["baseline"] for a in by_attack(regression, "label inference"))


def tags_of(run_dir) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    return set(EventAccumulator(str(run_dir / "tensorboard" / "gal")).Reload().Tags()["scalars"])


@pytest.mark.parametrize("privacy", ["residual_laplace", "ip"])
def test_a_receiver_holding_the_whole_config_cannot_redraw_alices_noise(tiny, privacy):
    """The curious organization's attack, on the residual it kept: redraw the noise from every seed it can derive
    from its copy of the run config (the clipping bounds handed to it) and take it off. Alice's noise comes from her
    own secret, so it does no better than the values as they came (Laplace) or than the same estimate from unknown
    draws (interval privacy); with the run seed as her secret it takes the Laplace noise off entirely."""
    base = {"data.organizations": 3, "gal.privacy": privacy, "run.rounds": 1, "run.seed": 5}
    cfg = tiny(**base)
    p = train(cfg, verbose=False)["privacy"]
    public = [m for _, d, m in read_kept(cfg.run_dir / "parties" / "org1" / "messages") if d == "in"][0].values
    clean = [m for _, d, m in read_kept(cfg.run_dir / "messages") if d == "own"][0].values
    assert p["residual_received_mae"] == pytest.approx(float((public - clean).abs().mean()))
    floor = p["residual_received_mae"] if privacy == "residual_laplace" else p["residual_blind_mae"]
    assert p["residual_attack_mae"] >= 0.8 * floor
    [recovery] = [a for a in p["attacks"] if a["attack"] == "residual recovery"]
    assert recovery["gain"] <= 0.2 * recovery["baseline"]
    p = train(tiny(**base, **{"gal.privacy_secret": 5}), verbose=False, overwrite=True)["privacy"]  # the run seed
    floor = p["residual_received_mae"] if privacy == "residual_laplace" else p["residual_blind_mae"]
    assert p["residual_attack_mae"] < (0.05 if privacy == "residual_laplace" else 0.8) * floor
    assert not p["budget"][0]["private"]  # neither is DP for the data set


def test_late_fusion_sends_the_labels_and_its_audit_says_so(tiny):
    late = train(tiny(**{"method": "late"}), verbose=False)
    assert late["privacy"]["label_attack_accuracy"] == 1.0
    assert not late["privacy"]["budget"][0]["private"] and "labels themselves" in late["privacy"]["budget"][0]["why"]


# --- every family, through the command ----------------------------------------------------------------------------
FAMILIES = {
    "ascii": {"method": "ascii", "data.organizations": 2, "run.rounds": 2, "learner.model": ["tree"]},
    "dc": {"method": "dc_smote", **TINY_DC, "data.organizations": 1},
    "mpdl": {"method": "mpdl", **TINY_MPDL, "run.rounds": 1, "mpdl.epsilon": 0},
}


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_audit_command_on_a_run_of_each_family(tmp_path, family, capsys):
    values = {"compare": [], "run.device": "cpu", "out": str(tmp_path / family), "run.audit": False}
    cfg = RunConfig.from_dict({**values, **FAMILIES[family]})
    results = train(cfg, verbose=False)
    assert "privacy" not in results
    assert cli.main(["audit", "--out", str(cfg.run_dir)]) == 0
    assert "wrote the privacy section" in capsys.readouterr().out
    written = json.loads((cfg.run_dir / "results.json").read_text())
    section = written["privacy"]
    assert section["attacks"] and all({"score", "baseline", "receiver", "target", "held"} <= set(a)
                                      for a in section["attacks"])  # fmt: skip
    assert written["value"] == results["value"] and section["main_task"]["value"] == results["value"]
    if family == "ascii":  # the agents are sent the labels; what the predicted classes tell Alice beats guessing
        assert all(a["score"] == 1.0 for a in section["attacks"] if a["attack"] == "label reading")
        assert any(a["gain"] > 0 for a in section["attacks"] if a["attack"] == "feature inference")
    if family == "dc":  # the analyst with a colluder's anchor inverts the reduction; a lower rank hides more
        inversions = [a for a in section["attacks"] if a["attack"] == "anchor inversion"]
        assert inversions and all(a["score"] < a["baseline"] for a in inversions)
        low = train(RunConfig.from_dict({**values, **FAMILIES[family], "dc.dim": 1, "run.audit": True}),
                    verbose=False, overwrite=True)["privacy"]  # fmt: skip
        share = lambda attacks: sum(a["gain"] / a["baseline"] for a in attacks) / len(attacks)  # noqa: E731
        assert share([a for a in low["attacks"] if a["attack"] == "anchor inversion"]) < 0.8 * share(inversions)
    if family == "mpdl":  # without noise, each party rebuilds the other's rows better than guessing the means
        rebuilds = ("feature reconstruction", "h0 inversion")
        assert all(a["gain"] > 0 for a in section["attacks"] if a["attack"] in rebuilds)
        # C's errors of a's activations carry b's labels: direction scoring reads them with no known label
        [direction] = [a for a in section["attacks"] if a["attack"] == "direction scoring"]
        assert (direction["receiver"], direction["target"]) == ("a", "b") and direction["score"] > 0.9
        assert direction["score"] > direction["baseline"] + 0.1
        assert not section["budget"][0]["private"]
        private = train(RunConfig.from_dict({**values, **FAMILIES[family], "mpdl.epsilon": 0.5, "run.audit": True}),
                        verbose=False, overwrite=True)["privacy"]  # fmt: skip
        assert all(a["gain"] < 0.15 * a["baseline"] for a in private["attacks"] if a["attack"] in rebuilds)
        [budget] = private["budget"]  # tabular h0 scales by the data's own minimum and maximum: no guarantee
        assert not budget["private"] and "epsilon" not in budget and "minimum and maximum" in budget["why"]


def test_mpdl_h0_prints_an_epsilon_only_where_the_features_range_is_public():
    """Images' pixels lie in the public [0, 1]: h0's per-row Laplace is ε-DP for one person's row replaced (one
    release; the FTL reference's own draws a second). Tabular features scaled by the data's own minimum and maximum:
    one row moves the bounds, so no ε (the test above)."""
    from types import SimpleNamespace

    from vcl.datamodules.overlap import OverlapDataModule

    from vcl.methods.mpdl.audit import budget

    dm = OverlapDataModule("digits_image", gamma=0.2, test_fraction=0.1)
    dm.setup()
    values = {"method": "mpdl", "data.dataset": "digits_image", "mpdl.epsilon": 0.5, "compare": []}
    run = SimpleNamespace(config=RunConfig.from_dict(values), data=lambda: dm.data, method="mpdl")
    b = budget(run)
    assert b["private"] and b["releases"] == 1 and b["epsilon"] == pytest.approx(0.5, abs=1e-3)
    assert "public range [0, 1]" in b["neighbours"]
    run.config = RunConfig.from_dict({**values, "compare": ["ftl"]})
    assert budget(run)["releases"] == 2


def test_a_party_keeping_its_files_elsewhere_is_audited_from_there(tiny, tmp_path):
    """``transport.party_dirs``: a party's checkpoints, and so what it kept, sit in its own root on this machine."""
    elsewhere = tmp_path / "elsewhere"
    results = train(tiny(**{"transport.party_dirs": ["", "", str(elsewhere), ""], "run.rounds": 2}), verbose=False)
    assert list((elsewhere / "org2" / "messages").glob("round-*.vclw"))
    receivers = {a["receiver"] for a in by_attack(results, "label inference")}
    assert receivers == {"org1", "org2", "org3"}


def test_the_score_counted_is_the_strongest_attack_run_and_its_worst_receiver_is_shown():
    """benchmarks/privacy.py counts, per receiver-target pair, the attack that gained most (label reading beats the
    learned label inference for org1, not for org2) and shows the pair that gained most beside the mean over pairs
    (a record made before the audit kept its counted pairs: the benchmark counts them the same way)."""
    from tests.helpers import benchmark

    privacy = benchmark("privacy")

    def score(attack, receiver, value, baseline=0.4):
        return {"attack": attack, "receiver": receiver, "target": "alice", "metric": "accuracy", "score": value,
                "baseline": baseline, "beside": {}}  # fmt: skip

    attacks = [score("label reading", "org1", 1.0), score("label reading", "org2", 0.4),
               score("label inference", "org1", 0.7), score("label inference", "org2", 0.7)]  # fmt: skip
    record = {"dataset": "wine", "method": "gal", "defence": "none", "metric": "accuracy", "value": 0.9, "seed": 0,
              "attacks": attacks, "budget": []}  # fmt: skip
    [row] = privacy.summary_rows([record])
    assert row["ap"]["label reading"] == pytest.approx(0.5) and row["ap"]["label inference"] == pytest.approx(0.5)
    assert row["strongest"]["labels"] == pytest.approx(0.75)  # org1's reading (1.0), org2's inference (0.5)
    assert row["worst_receiver"]["labels"] == pytest.approx(1.0)  # org1 reads every label
    record["attacks"] = attacks[:1] + [score("label reading", "org2", 1.0)] + attacks[2:]
    [row] = privacy.summary_rows([record])
    assert row["strongest"]["labels"] == pytest.approx(1.0) and row["ap"]["label inference"] < 0.6
    assert "| 1.00 ± 0.00 (1.00) |" in privacy.report([record])


@pytest.mark.parametrize("method", ["dc_tsvd", "dc_raw"])
def test_dc_anchor_shares_are_read_as_the_rows_with_no_known_row(tmp_path, method):
    """DC(TSVD) sends each other worker of the row group a row-aligned rank-3 copy of its rows plus noise, DC(raw)
    the rows: read as the rows, with no known row, the first rebuilds much, the second everything."""
    values = {**TINY_DC, "method": method, "compare": [], "run.device": "cpu", "out": str(tmp_path), "run.audit": True}
    p = train(RunConfig.from_dict(values), verbose=False)["privacy"]
    read = [a for a in p["attacks"] if a["attack"] == "anchor share read"]
    assert read and all(a["known"] == 0 and a["receiver"] != "the analyst" for a in read)
    if method == "dc_raw":
        assert all(a["score"] < 1e-6 for a in read)
    else:
        assert all(0 < a["score"] < 0.6 * a["baseline"] for a in read)
    features = [e for e in p["exposure"] if e["secret"] == "features" and e["known"] == 0]
    assert features[0]["worst"] >= max(a["share"] for a in read) - 1e-12


def test_interm_gradients_give_the_labels_away_to_direction_scoring_with_no_known_label(tiny):
    """Interm fusion sends each organization its rows' gradients every minibatch, and the minibatch schedule comes
    from the run seed it holds: on a binary task every row's gradient is w·(p − y), so the sign of its projection on
    the gradients' main direction is the label (up to which side is the rarer class)."""
    base = {"data.dataset": "breast_cancer", "method": "interm", "data.organizations": 3, "learner.model": ["mlp"],
            "learner.epochs": 2}  # fmt: skip
    p = train(tiny(**base), verbose=False)["privacy"]
    direction = [a for a in p["attacks"] if a["attack"] == "direction scoring"]
    assert len(direction) == 2 and all(a["score"] > 0.95 > 0.7 > a["baseline"] for a in direction)
    learned = by_attack({"privacy": p}, "gradient label inference")
    assert learned and all(a["score"] > a["own"] for a in learned)
    [labels] = [e for e in p["exposure"] if e["secret"] == "labels" and e["known"] == 0]
    assert labels["worst"] > 0.9 and labels["worst_attack"] == "direction scoring"


def test_one_cell_of_the_privacy_record_reruns_to_its_figures():
    """``benchmarks/privacy.py --only wine ascii none`` at seed 0 gives the record's figures again: its main task and
    every attack's score, baselines and share (the record docs/privacy.md quotes). (Its GAL cells were made before
    GAL's line search was fixed on 2026-12-07, and rerun they give other figures: privacy.md says so.)"""
    from pathlib import Path

    from tests.helpers import benchmark
    from vcl.coordinator.sweep import Job

    privacy = benchmark("privacy")
    path = Path(__file__).resolve().parent.parent / "docs" / "records" / "2026-12-07-cpu" / "privacy.json"
    records = json.loads(path.read_text())
    records = records if isinstance(records, list) else records["records"]
    cell = ("wine", "ascii", "none", 0)
    [kept] = [r for r in records if (r["dataset"], r["method"], r["defence"], r["seed"]) == cell]
    [options] = [o for method, defence, o, _ in privacy.CELLS if (method, defence) == ("ascii", "none")]
    cfg = privacy.config("wine", "ascii", options, 0, quick=False)
    again = Job("privacy", cfg, "ascii", kept["model"], privacy.details, {"defence": "none"})()
    assert again["value"] == pytest.approx(kept["value"], abs=1e-9)
    fields = ("attack", "receiver", "target", "known", "secret")
    assert [tuple(a[f] for f in fields) for a in again["attacks"]] == [
        tuple(a[f] for f in fields) for a in kept["attacks"]
    ]
    for a, b in zip(again["attacks"], kept["attacks"], strict=True):
        assert (a["score"], a["baseline"], a["share"]) == pytest.approx(
            (b["score"], b["baseline"], b["share"]), abs=1e-9
        )


def test_the_audit_command_takes_the_counts_of_known_rows(tiny, capsys):
    cfg = tiny(**{"run.rounds": 1, "run.audit": False})
    train(cfg, verbose=False)
    assert cli.main(["audit", "--out", str(cfg.run_dir), "--known", "0", "25"]) == 0
    out = capsys.readouterr().out
    assert (
        "privacy of the labels (0 known rows of 142)" in out and "privacy of the labels (25 known rows of 142)" in out
    )
    p = json.loads((cfg.run_dir / "results.json").read_text())["privacy"]
    assert p["known_rows"] == [25] and {a["known"] for a in p["attacks"]} == {0, 25}
    assert cli.main(["audit", "--out", str(cfg.run_dir), "--known", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--known 1" in err and "pass 0 or 2 or more" in err
