"""DC analysis with SMOTE anchors: the collaboration maps, the equivalence with centralized least
squares, the SMOTE variance identity, the metrics, the c × d split, the boundary, and bad input."""

import json

import numpy as np
import pytest
import torch
from scipy.stats import wasserstein_distance
from vcl.datamodules.grid import GridDataModule

import train as cli
from vcl.config import RunConfig
from vcl.coordinator.assembly import build_protocol, datamodule_for
from vcl.coordinator.runner import train
from vcl.messages import Ack, Labels, Step
from vcl.methods.dc.anchors import smote
from vcl.methods.dc.messages import (
    AnchorPredictions,
    AnchorShare,
    KeptModel,
    RawFeatures,
    ReducedRepresentation,
    Scores,
)
from vcl.methods.dc.metrics import amd, dice, emd, nmi, top_features
from vcl.methods.dc.models import collaboration_maps
from vcl.methods.experimenter import EXPERIMENTER


def dc_config(tmp_path, **overrides) -> RunConfig:
    values = {
        "method": "dc_smote",
        "data.dataset": "wine",
        "dc.public_rows": 30,
        "dc.anchor_rows": 200,
        "dc.dim": 3,
        "dc.smote_k": 10,
        "compare": [],
        "run.device": "cpu",
        "out": str(tmp_path / "dc"),
    }
    return RunConfig.from_dict({**values, **overrides})


def built(cfg: RunConfig):
    dm = datamodule_for(cfg)
    dm.setup()
    return dm.data, build_protocol(cfg, dm.data)


# --- the master's algebra ---------------------------------------------------------------------------
@pytest.mark.parametrize("centre,tolerance", [(False, 1e-4), (True, 0.06)])
def test_collaboration_maps_bring_every_group_to_the_same_representation(centre, tolerance):
    rng = np.random.default_rng(0)
    B = rng.standard_normal((3, 10))  # data near a 3-dimensional subspace of 10 features

    def draw(n):
        return rng.standard_normal((n, 3)) @ B + 0.01 * rng.standard_normal((n, 10))

    anchor = draw(300)
    reps = []
    for _ in range(3):  # three row groups, each with its own projection (5 of 10 dimensions: lossy)
        X = draw(1000)
        mean = X.mean(0) if centre else np.zeros(10)  # PCA centres on the group's mean
        W = np.linalg.svd(X - mean, full_matrices=False)[2][:5].T
        reps.append((anchor - mean) @ W)
    Z, G = collaboration_maps(reps, 3)
    assert np.allclose(Z.T @ Z / len(anchor), np.eye(3), atol=1e-10)  # √r-scaled orthonormal columns
    mapped = [a @ g for a, g in zip(reps, G, strict=True)]
    # exact up to noise for linear maps; PCA's per-group centring adds an offset no linear G_i removes
    for a in mapped:
        assert np.linalg.norm(a - Z) / np.linalg.norm(Z) < tolerance
    assert np.linalg.norm(mapped[0] - mapped[1]) / np.linalg.norm(Z) < 2 * tolerance
    # without shared structure the groups cannot agree: independent noise
    noise = [rng.standard_normal((300, 5)) for _ in range(2)]
    _, G = collaboration_maps(noise, 3)
    assert np.linalg.norm(noise[0] @ G[0] - noise[1] @ G[1]) / np.linalg.norm(Z) > 0.5


def test_raw_anchors_and_lossless_reduction_match_centralized_least_squares(tmp_path):
    from sklearn.linear_model import LinearRegression

    cfg = dc_config(
        tmp_path,
        method="dc_raw",
        **{"dc.reduction": "identity", "dc.central": "sklearn:sklearn.linear_model.LinearRegression"},
    )
    data, protocol = built(cfg)
    protocol.run_round()
    X, y = data.full("train").double().numpy(), data.labels["train"].numpy()
    central = LinearRegression().fit(X, np.eye(data.num_classes)[y]).predict(X)
    assert np.abs(protocol.F["train"].cpu().numpy() - central).max() < 1e-3
    # and with PCA keeping every dimension (lossless up to each party's centering), nearly the same fit
    cfg = dc_config(
        tmp_path, method="dc_raw", **{"dc.dim": 0, "dc.central": "sklearn:sklearn.linear_model.LinearRegression"}
    )
    _, pca = built(cfg)
    pca.run_round()
    assert np.mean(pca.F["train"].cpu().numpy().argmax(1) == central.argmax(1)) > 0.95


# --- anchors ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.5, 2.5])
def test_smote_variance_identity(alpha):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 4)) * np.array([1.0, 2.0, 0.5, 3.0]) + 5.0
    anchors = smote(X, 60_000, k=299, alpha=alpha, rng=rng)  # k = p − 1: independent partners
    ratio = anchors.var(0) / X.var(0)
    assert np.allclose(ratio, 2 * alpha**2 / 3 - alpha + 1, rtol=0.04), ratio
    assert np.allclose(anchors.mean(0), X.mean(0), atol=0.05 * X.std(0).max())


def test_smote_interpolates_within_k_neighbours_and_refuses_bad_k():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((50, 3))
    anchors = smote(X, 50, k=1, alpha=1.0, rng=rng)  # one row per public row, on the segment to its neighbour
    assert anchors.shape == (50, 3)
    from vcl.errors import VCLInputError

    with pytest.raises(VCLInputError, match="dc.smote_k=50 with 50 public rows"):
        smote(X, 10, k=50, alpha=1.5, rng=rng)


@pytest.mark.parametrize("method", ["dc_smote", "dc_tsvd", "dc_rand", "dc_raw"])
def test_every_worker_builds_the_same_anchors(tmp_path, method):
    _, protocol = built(dc_config(tmp_path, method=method))
    protocol.run_round()
    anchors = [protocol.federation.transport.party(w).anchor for w in protocol.flat]
    r = protocol.labels["train"].shape[0] if method == "dc_raw" else 200
    assert anchors[0].shape == (r, 13)
    assert all(np.array_equal(anchors[0], a) for a in anchors[1:])


# --- metrics ------------------------------------------------------------------------------------------
def test_amd_and_emd_on_hand_computed_cases():
    X = np.array([[0.0, 0.0], [1.0, 0.0]])
    Y = np.array([[0.0, 0.0], [10.0, 0.0]])
    assert amd(X, Y) == pytest.approx(0.5)  # (0 + 1) / 2
    assert amd(Y, X) == pytest.approx(4.5)  # (0 + 9) / 2
    assert emd(X, Y) == pytest.approx(4.5)  # match (0,0)-(0,0), (1,0)-(10,0): (0 + 9) / 2
    A = np.array([[0.0, 0.0], [4.0, 0.0]])
    B = np.array([[4.0, 1.0], [0.0, 3.0]])
    assert emd(A, B) == pytest.approx(2.0) and amd(A, B) == pytest.approx(2.0)  # (3 + 1) / 2
    assert emd(np.array([[0.0], [2.0]]), np.array([[1.0]])) == pytest.approx(1.0)  # n ≠ r: transport
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal(40), rng.standard_normal(40) + 1
    assert emd(u[:, None], v[:, None]) == pytest.approx(wasserstein_distance(u, v))


def test_recognition_metrics():
    assert dice(np.array([0, 1, 2]), np.array([2, 5, 0])) == pytest.approx(2 / 3)
    assert list(top_features(np.array([0.1, 0.0, 0.5, 0.1]), 3)) == [2, 0, 3]
    assert nmi(np.array([0, 0, 1, 1]), np.array([1, 1, 0, 0])) == pytest.approx(1.0)
    assert nmi(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])) == pytest.approx(0.0, abs=1e-12)


# --- the c × d split ----------------------------------------------------------------------------------
def test_grid_split_rows_columns_public_and_labels():
    dm = GridDataModule("dc_artificial", row_groups=2, column_groups=2, public_rows=100, standardize=False)
    dm.setup()
    data = dm.data
    assert data.shape == (2, 2)
    assert [v.columns for v in data.parties[0]] == [
        [f"x{k}" for k in range(1, 21, 2)],
        [f"x{k}" for k in range(2, 21, 2)],
    ]
    assert [v.splits["train"].shape for v in data.parties[1]] == [(500, 10), (500, 10)]
    assert data.public.shape == (100, 20) and data.labels["test"].shape == (1000,)
    full = data.full("train")
    assert torch.equal(full[:500, 0::2], data.parties[0][0].splits["train"])
    rows = {tuple(r.tolist()) for r in torch.cat([full, data.full("test"), data.public])}
    assert len(rows) == 2100  # train, test and public rows are disjoint
    assert torch.equal(torch.cat(data.group_labels), data.labels["train"])


# --- the boundary -------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["dc_smote", "dc_tsvd", "dc_rand"])
def test_only_reduced_representations_reach_the_master(tmp_path, method):
    data, protocol = built(dc_config(tmp_path, method=method))
    sent = []
    protocol.federation.channel.tap = lambda m: sent.append(m) or m
    protocol.run_round()
    workers = set(protocol.flat)
    to_master = [m for m in sent if m.receiver == "master" and m.sender in workers]
    assert {type(m) for m in to_master} == {ReducedRepresentation, Labels, Ack}  # Ack: a request done, no tensor
    # the master gets scores from the experimenter, never a model or a row; workers send it their kept t_i
    assert {type(m) for m in sent if m.receiver == "master" and m.sender not in workers} == {Scores}
    assert {m.sender for m in sent if isinstance(m, KeptModel)} == {row[0] for row in protocol.grid}
    sent = [m for m in sent if EXPERIMENTER not in (m.sender, m.receiver)]  # the experimenter is outside
    assert {type(m) for m in sent} <= {ReducedRepresentation, Labels, AnchorPredictions, AnchorShare, Step, Ack}
    raw = [col for row in data.parties for v in row for x in v.splits.values() for col in x.T]
    for message in sent:
        if isinstance(message, Labels):
            continue
        for tensor in message.payload().values():
            for col in tensor.reshape(tensor.shape[0], -1).T:
                assert not any(col.shape == r.shape and torch.allclose(col, r, atol=1e-4) for r in raw)
    # bytes: each worker's reduced rows (train, test, anchors) × dim, the labels, the anchors' predictions
    n_test, k = data.labels["test"].shape[0], data.num_classes
    expected = sum(4 * 3 * (v.splits["train"].shape[0] + n_test + 200) for row in data.parties for v in row)
    expected += 4 * data.labels["train"].shape[0] + 4 * 200 * k * 4
    shares = sum(m.payload()[key].numel() * 4 for m in sent if isinstance(m, AnchorShare) for key in m.payload())
    assert protocol.federation.channel.total_bytes() == expected + shares
    assert (shares == 0) == (method == "dc_smote")  # SMOTE anchors come from public rows: nothing shared


def test_centralized_reference_is_the_one_that_sends_raw_rows(tmp_path):
    _, protocol = built(dc_config(tmp_path, method="centralized"))
    sent = []
    protocol.federation.channel.tap = lambda m: sent.append(m) or m
    protocol.run_round()
    assert {type(m) for m in sent if m.sender in protocol.flat} == {RawFeatures, Labels}
    _, local = built(dc_config(tmp_path, method="local"))
    local.run_round()
    assert local.federation.channel.total_bytes() == 0


# --- end to end -----------------------------------------------------------------------------------------
def test_dc_smote_on_the_artificial_problem_from_a_config(tmp_path):
    from pathlib import Path

    config = Path(__file__).resolve().parents[1] / "configs" / "dc_smote_artificial.yaml"
    values = {**RunConfig.from_yaml(config).to_dict(), "compare": ["centralized", "local"], "run.device": "cpu"}
    cfg = RunConfig.from_dict({**values, "out": str(tmp_path / "a")})
    results = train(cfg, verbose=False)
    on_disk = json.loads((tmp_path / "a" / "results.json").read_text())
    assert on_disk["value"] == results["value"] and [r["round"] for r in on_disk["rounds"]] == [0, 1]
    assert any((tmp_path / "a" / "tensorboard").iterdir())
    scores = results["rounds"][-1]["scores"]
    local = results["compare"]["local"]["rounds"][-1]["scores"]
    assert scores["accuracy"] >= 0.95 and scores["dice3"] == 1.0
    assert local["accuracy"] < 0.8 and local["dice3"] <= 0.7  # a party alone sees at most 2 of 3 essentials
    assert results["compare"]["centralized"]["rounds"][-1]["scores"]["dice3"] == 1.0
    assert 1.5 < scores["amd_raw"] < 2.5 and scores["emd"] >= scores["amd_raw"]


def _fails(args, capsys, message):
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--dc.smote_k", "40", "--dc.public_rows", "30"], "dc.smote_k=40 with dc.public_rows=30"),
        (["--dc.dim", "9"], "dc.dim=9: party party1.1 holds 7 columns"),
        (["--compare", "gal"], "which is DC; methods of different families"),
        (["--data.dataset", "diabetes"], "the DC methods need a classification dataset"),
        (["--dc.reduction", "umap"], "dc.reduction='umap' is unknown"),
        (["--dc.interpretable", "sklearn:sklearn.svm.SVC"], "is not a classifier with feature_importances_"),
        (["--dc.feature_split", "type"], "dc.feature_split=type needs 2 column groups"),
        (["--dc.row_groups", "0"], "dc.row_groups=0 is not valid; it takes a whole number > 0."),
    ],
)
def test_bad_dc_input_fails_before_work(tmp_path, capsys, args, message):
    out = tmp_path / "bad"
    _fails(
        [
            "--method",
            "dc_smote",
            "--data.dataset",
            "wine",
            "--dc.public_rows",
            "30",
            "--dc.smote_k",
            "10",
            *args,
            "--out",
            str(out),
        ],
        capsys,
        message,
    )
    assert not out.exists()


def test_xgboost_takes_any_labels_and_is_stored_and_loaded_as_data():
    from vcl.models.boosting import XGBoost
    from vcl.models.sklearn import dump_estimator, load_estimator

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = np.where(X[:, 0] > 0, 5, 2)  # labels 2 and 5: XGBoost itself asks for 0 and 1
    model = XGBoost(random_state=0).fit(X, y)
    assert list(model.classes_) == [2, 5] and (model.predict(X) == y).mean() > 0.95
    assert model.feature_importances_.argmax() == 0 and model.feature_importances_.shape == (4,)
    again = load_estimator(dump_estimator(model))
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))
    single = XGBoost().fit(X, np.full(200, 3))  # one class among a worker's anchor labels
    assert list(single.predict(X[:5])) == [3] * 5 and single.predict_proba(X).shape == (200, 1)


def test_dc_xgboost_without_xgboost_installed_is_refused_before_work(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "xgboost" else real(name, *a))
    _fails(["--method", "dc_smote", "--data.dataset", "wine", "--dc.central", "xgboost", "--out", str(tmp_path / "x")],
           capsys, "dc.central=xgboost needs XGBoost, which is not installed")  # fmt: skip


def test_random_anchors_spread_over_a_wider_range_about_the_middle():
    from vcl.methods.dc.anchors import GridLayout, make_anchor_construction

    layout = GridLayout(1, [[0, 1]])
    shares = {(0, 0): {"low": np.array([0.0, -2.0]), "high": np.array([1.0, 2.0])}}
    plain = make_anchor_construction("rand", 4000).anchor(layout, shares, None, np.random.default_rng(0))
    wide = make_anchor_construction("rand", 4000, rand_spread=2.0).anchor(
        layout, shares, None, np.random.default_rng(0)
    )
    assert plain.min(0) == pytest.approx([0.0, -2.0], abs=0.01) and plain.max(0) == pytest.approx([1.0, 2.0], abs=0.01)
    assert wide.min(0) == pytest.approx([-0.5, -4.0], abs=0.02) and wide.max(0) == pytest.approx([1.5, 4.0], abs=0.02)


def test_dc_benchmark_draws_figures_1_and_2_from_records_alone(tmp_path):
    """benchmarks/dc.py: draw_fig1 and draw_fig2 take the dc_figures records only (no run inside), and
    figure_records keeps features 1-3 of the train/test/public rows with labels, and of each construction's anchors."""
    from tests.helpers import benchmark

    dc = benchmark("dc")
    rng = np.random.default_rng(0)

    def rows(n):
        return np.round(rng.normal(size=(n, 3)), 4).tolist()

    records = [{"benchmark": "dc_figures", "set": s, "rows": 12, "x": rows(12), "y": [0, 1] * 6}
               for s in ("train", "test", "public")]  # fmt: skip
    records += [{"benchmark": "dc_figures", "set": "anchor", "method": m, "rows": 9, "x": rows(9)}
                for m in ("dc_rand", "dc_tsvd", "dc_smote")]  # fmt: skip
    dc.draw_fig1(records, tmp_path / "fig1.png")
    dc.draw_fig2(json.loads(json.dumps(records)), tmp_path / "fig2.png", dpi=50)
    for name in ("fig1.png", "fig2.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    made = dc.figure_records(0, methods=["dc_smote"], **{"dc.anchor_rows": 50})
    assert [(r["set"], r.get("method")) for r in made] == [("train", None), ("test", None), ("public", None),
                                                           ("anchor", "dc_smote")]  # fmt: skip
    assert [len(r["x"]) for r in made] == [1000, 1000, 100, 50] and all(len(r["x"][0]) == 3 for r in made)
    assert [len(r.get("y", [])) for r in made] == [1000, 1000, 100, 0] and set(made[0]["y"]) == {0, 1}
    assert all(round(v, 4) == v for r in made for row in r["x"] for v in row)
    json.dumps(made, allow_nan=False)
