"""ASCII: the updates of eqs 9–13 by hand and by brute force, SAMME for one agent, the boundary, stops, resume."""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from sklearn.ensemble import AdaBoostClassifier
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier
from vcl.callbacks import RoundCheckpoint
from vcl.datamodules import TabularDataModule
from vcl.datamodules.tabular import FeatureView
from vcl.models import ClassifierSettings, LearnerSettings, NetClassifier, SklearnClassifier

from vcl.coordinator.assembly import build_protocol, check_config
from vcl.coordinator.runner import train
from vcl.engine.tasks import Task
from vcl.errors import VCLInputError
from vcl.family import compare_methods
from vcl.messages import Ack, Labels
from vcl.methods.ascii.coordinator import ASCIIOptions, AssistedClassification
from vcl.methods.ascii.messages import ClassVotes, IgnoranceScores, Interchange
from vcl.methods.ascii.party import IgnoranceAgent
from vcl.methods.ascii.updates import joint_factor, model_weight, pass_on, samme_code
from vcl.methods.assisted import OrganizationFederation
from vcl.methods.messages import PredictionRequest


class Fixed:
    """A stub classifier whose predictions are fixed per row (the single feature is the row index)."""

    def __init__(self, classes):
        self.classes = torch.as_tensor(classes)

    def fit(self, features, targets, sample_weight=None):
        return self

    def predict(self, features):
        return self.classes[features[:, 0].long()]


def fixed_chain(predictions, labels, k, variant="ascii", alpha="paper"):
    """Agents whose classifiers predict ``predictions[m]`` (one vector), or ``predictions[m][t - 1]`` in round t."""
    n = len(labels)
    rows = torch.arange(n, dtype=torch.float32)[:, None]
    agents = []
    for m, pred in enumerate(predictions):
        agent = IgnoranceAgent(
            FeatureView(f"a{m}", ["row"], {"train": rows}), "tree", LearnerSettings(), ClassifierSettings(), k
        )
        script = iter(pred) if isinstance(pred[0], (list, tuple, np.ndarray)) else None
        agent._new_learner = lambda out, seed, loss=None, p=pred, s=script: Fixed(p if s is None else next(s))
        agents.append(agent)
    task = Task("classification", k, "ce")
    federation = OrganizationFederation(agents)
    options = ASCIIOptions(variant=variant, alpha=alpha)
    return AssistedClassification(task, federation, {"train": torch.tensor(labels)}, options)


def test_two_agent_round_matches_hand_computed_eqs_9_to_12():
    # K = 3; A is wrong on row 2, B on rows 1 and 3.
    y = [0, 1, 2, 0]
    protocol = fixed_chain([[0, 1, 0, 0], [0, 2, 2, 1]], y, k=3, alpha="paper")
    sent = []
    protocol.federation.channel.tap = lambda m: sent.append(m) or m
    record = protocol.run_round()
    # eq. 9: r̄ = 3/4, α_A = log 3 + log 2; eq. 10: w_B = (1, 1, 6, 1)/9
    # eq. 11 with β_A = (K−1)²/K α_A: α_B = log 2 + log(37/2) = log 37; eq. 12: w_A' = (1, 37, 6, 37)/81
    assert record["alphas"] == pytest.approx([math.log(6), math.log(37)], rel=1e-6)
    hops = [m for m in sent if isinstance(m, IgnoranceScores)]
    assert [(m.sender, m.receiver) for m in hops] == [("a0", "a1"), ("a1", "a0")]
    torch.testing.assert_close(hops[0].scores, torch.tensor([1.0, 1, 6, 1]) / 9)
    torch.testing.assert_close(hops[1].scores, torch.tensor([1.0, 37, 6, 37]) / 81)
    torch.testing.assert_close(hops[0].alphas, torch.tensor([math.log(6)]))
    torch.testing.assert_close(hops[1].alphas, torch.tensor([math.log(6), math.log(37)]))
    assert hops[0].round_start is None and hops[1].round_start is None  # two agents need no more
    # Alice's votes: Σ α g, SAMME-coded
    expected = math.log(6) * samme_code(torch.tensor([0, 1, 0, 0]), 3) + math.log(37) * samme_code(
        torch.tensor([0, 2, 2, 1]), 3
    )
    torch.testing.assert_close(protocol.F["train"], expected)
    # ASCII-Simple: B's α from its own loss only (eq. 9 on w_B): r̄ = 7/9 → α = log(7/2) + log 2 = log 7
    simple = fixed_chain([[0, 1, 0, 0], [0, 2, 2, 1]], y, k=3, variant="simple").run_round()
    assert simple["alphas"] == pytest.approx([math.log(6), math.log(7)], rel=1e-6)
    # the exact α (eq. 6's minimizer): w_B already holds A's loss, so it is eq. 9 on w_B too, and no α's travel
    exact = fixed_chain([[0, 1, 0, 0], [0, 2, 2, 1]], y, k=3, alpha="exact")
    sent = []
    exact.federation.channel.tap = lambda m: sent.append(m) or m
    assert exact.run_round()["alphas"] == pytest.approx([math.log(6), math.log(7)], rel=1e-6)
    hops = [m for m in sent if isinstance(m, IgnoranceScores)]
    torch.testing.assert_close(hops[0].scores, torch.tensor([1.0, 1, 6, 1]) / 9)
    assert all(m.alphas.numel() == 0 and m.round_start is None for m in hops)


def _exp_loss(beta, w, fixed, g, y, k):
    """Σ w exp(−yᵀ(fixed + β g)/K) with SAMME-coded y and g."""
    return float((w * torch.exp(-((samme_code(y, k) * (fixed + beta * samme_code(g, k))).sum(1)) / k)).sum())


@pytest.mark.parametrize("agents", [2, 3])
def test_paper_alpha_minimizes_eq_8_as_printed_by_brute_force(agents):
    """ascii.alpha=paper: each α (eqs 9, 11, 13) is (K−1)²/K times argmin_β of eq. 8 as printed (Appendix B):
    the received scores w^(m) times the exponential loss of the round's preceding models (counted twice)."""
    k, n = 4, 60
    gen = torch.Generator().manual_seed(agents)
    y = torch.randint(0, k, (n,), generator=gen)
    w_start = torch.rand(n, generator=gen, dtype=torch.float64) + 0.1
    w, fixed, start = w_start / w_start.sum(), torch.zeros(n, k, dtype=torch.float64), w_start / w_start.sum()
    for m in range(agents):
        g = torch.where(torch.rand(n, generator=gen) < 0.6, y, torch.randint(0, k, (n,), generator=gen))
        r = (g == y).double()
        alpha = model_weight(w, r, k, None if m == 0 else joint_factor(w, start))
        # the paper's objective for agent m: its scores w^(m) times the loss of this round's models so far
        best = minimize_scalar(lambda b, w=w, fixed=fixed, g=g: _exp_loss(b, w, fixed, g, y, k), bounds=(-50, 50))
        assert alpha == pytest.approx(best.x * k / (k - 1) ** 2, rel=1e-4)
        fixed = fixed + (k - 1) ** 2 / k * alpha * samme_code(g, k).double()
        w = pass_on(w, r, alpha)
        assert (w > 0).all() and float(w.sum()) == pytest.approx(1.0)


def _joint_loss_argmin(labels, k, before, g):
    """argmin_β Σ_i exp(−yᵢᵀ(Σ_j β_j g_j(x_i) + β g(x_i)) / K) (eq. 6, from w = 1), written out from scratch:
    ``before`` holds (β_j, predicted classes) of every model fitted before, rounds and agents alike."""
    n = len(labels)

    def code(classes):  # SAMME: 1 for the class, −1/(K−1) elsewhere
        c = np.full((n, k), -1.0 / (k - 1))
        c[np.arange(n), classes] = 1.0
        return c

    y = code(labels)
    f = sum((b * code(p) for b, p in before), np.zeros((n, k)))
    margin_f, margin_g = (y * f).sum(1), (y * code(g)).sum(1)
    res = minimize_scalar(
        lambda b: np.exp(-(margin_f + b * margin_g) / k).sum(),
        bounds=(-60, 60),
        method="bounded",
        options={"xatol": 1e-11},
    )
    return res.x


@pytest.mark.parametrize("k", [2, 3, 10])
@pytest.mark.parametrize("agents", [2, 3])
def test_exact_alpha_is_the_numerical_minimizer_of_the_joint_loss(agents, k):
    """ascii.alpha=exact: every α of a 3-round chain is (K−1)²/K times the numerical argmin of the joint
    forward-stagewise loss (eq. 6) given the models before it; the paper's eqs 11/13 miss it."""
    n, rounds = 300, 3
    rng = np.random.RandomState(10 * agents + k)
    y = rng.randint(0, k, n)
    # per agent and round: right on a random 70 % of the rows, a wrong class elsewhere
    preds = [
        [np.where(rng.rand(n) < 0.7, y, (y + rng.randint(1, k, n)) % k) for _ in range(rounds)] for _ in range(agents)
    ]
    c = (k - 1) ** 2 / k  # the loss's coefficient: β = (K−1)²/K · α
    for alpha in ("exact", "paper"):
        protocol = fixed_chain(preds, y.tolist(), k, alpha=alpha)
        before, gaps = [], []
        for t in range(rounds):
            record = protocol.run_round()
            fitted = record["alphas"] if not protocol.stopped else record["alphas"][: record["alphas"].index(0.0)]
            for m, a in enumerate(fitted):
                best = _joint_loss_argmin(y, k, before, preds[m][t]) / c
                if alpha == "exact" or m == 0:  # the first of a round: eq. 9 under both
                    assert a == pytest.approx(best, rel=1e-5, abs=1e-6), (alpha, t, m)
                else:
                    gaps.append(abs(a - best))
                before.append((c * a, preds[m][t]))
            if protocol.stopped:  # the paper's α may reach α ≤ 0 sooner; the exact one runs all rounds here
                assert alpha == "paper"
                break
        if alpha == "paper":
            assert gaps and min(gaps) > 1e-3  # eqs 11/13 count the preceding agents twice: not eq. 6's minimizer


def test_exact_ascii_is_ascii_simple(tiny):
    """With the exact α, ASCII fits the models ASCII-Simple fits and sends the same messages."""
    out = {}
    for method in ("ascii", "ascii_simple"):
        cfg = tiny(
            method=method,
            **{
                "data.organizations": 3,
                "learner.model": ["tree"],
                "learner.max_depth": 2,
                "run.rounds": 3,
                "ascii.alpha": "exact",
            },
        )
        dm = TabularDataModule("wine", organizations=3)
        dm.setup()
        protocol = build_protocol(cfg, dm.data)
        records = [protocol.run_round() for _ in range(3)]
        out[method] = ([r["alphas"] for r in records], protocol.F["test"], [r["interchange_bytes"] for r in records])
    assert out["ascii"][0] == out["ascii_simple"][0] and out["ascii"][2] == out["ascii_simple"][2]
    torch.testing.assert_close(out["ascii"][1], out["ascii_simple"][1])
    # the paper's α is another rule: the second agent's α of round 1 differs
    cfg = tiny(
        method="ascii",
        **{
            "data.organizations": 3,
            "learner.model": ["tree"],
            "learner.max_depth": 2,
            "run.rounds": 1,
            "ascii.alpha": "paper",
        },
    )
    dm = TabularDataModule("wine", organizations=3)
    dm.setup()
    paper = build_protocol(cfg, dm.data).run_round()["alphas"]
    assert paper[0] == pytest.approx(out["ascii"][0][0][0]) and abs(paper[1] - out["ascii"][0][0][1]) > 1e-3


def test_one_agent_is_samme():
    """One agent holding every feature: ASCII = SAMME, compared to scikit-learn's AdaBoostClassifier."""
    rounds = 6
    dm = TabularDataModule("wine", organizations=1)
    dm.setup()
    cfg = {
        "data.dataset": "wine",
        "data.organizations": 1,
        "learner.model": ["tree"],
        "learner.max_depth": 1,
        "run.rounds": rounds,
    }
    from vcl.config import RunConfig

    protocol = build_protocol(RunConfig.from_dict({**cfg, "method": "ascii", "compare": []}), dm.data)
    records = [protocol.run_round() for _ in range(rounds)]
    x = {s: v.numpy() for s, v in dm.data.views[0].splits.items()}
    y = dm.data.labels["train"].numpy()
    ada = AdaBoostClassifier(DecisionTreeClassifier(max_depth=1), n_estimators=rounds, random_state=0).fit(
        x["train"], y
    )
    assert [r["alphas"][0] for r in records] == pytest.approx(list(ada.estimator_weights_), rel=1e-4)
    ours = protocol.F["test"].argmax(1).cpu().numpy()
    np.testing.assert_array_equal(ours, ada.predict(x["test"]))


def test_ignorance_scores_are_positive_and_sum_to_one(tiny):
    cfg = tiny(
        method="ascii_random",
        **{"data.organizations": 3, "learner.model": ["tree"], "learner.max_depth": 2, "run.rounds": 3},
    )
    dm = TabularDataModule("wine", organizations=3)
    dm.setup()
    protocol = build_protocol(cfg, dm.data)
    sent = []
    protocol.federation.channel.tap = lambda m: sent.append(m) or m
    for _ in range(3):
        protocol.run_round()
    hops = [m for m in sent if isinstance(m, IgnoranceScores)]
    assert len(hops) == 9
    for m in hops:
        assert (m.scores > 0).all() and float(m.scores.sum()) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("alpha", ["paper", "exact"])
def test_only_named_messages_cross_and_bytes_are_what_the_paper_counts(tiny, alpha):
    cfg = tiny(
        method="ascii",
        **{
            "data.organizations": 2,
            "learner.model": ["tree", "logistic"],
            "learner.max_depth": 3,
            "run.rounds": 2,
            "ascii.alpha": alpha,
        },
    )
    dm = TabularDataModule("wine", organizations=2)
    dm.setup()
    protocol = build_protocol(cfg, dm.data)
    sent = []
    protocol.federation.channel.tap = lambda m: sent.append(m) or m
    records = [protocol.run_round() for _ in range(2)]
    for name, view in zip(protocol.federation.names, dm.data.views, strict=True):
        protocol.federation.transport.party(name).add_rows("new", view.splits["test"])
    protocol.predict("new")
    # Alice's requests (labels, hop facts, prediction) and the agents' replies carry no scores; Ack and
    # Interchange carry no tensor at all, so the bytes are what they were before the transport.
    assert {type(m) for m in sent} == {Labels, Ack, Interchange, IgnoranceScores, ClassVotes, PredictionRequest}
    assert all(m.payload() == {} for m in sent if isinstance(m, (Ack, Interchange)))
    raw = [col for v in dm.data.views for x in v.splits.values() for col in x.T]
    for message in sent:
        for tensor in message.payload().values():
            columns = tensor[:, None] if tensor.ndim == 1 else tensor  # a vector is one column
            for col in columns.T.float():
                assert not any(col.shape == r.shape and torch.allclose(col, r, atol=1e-4) for r in raw)
    # labels once (uint8, to bob only: Alice's own copy does not cross), then per round one n-vector
    # of float32 scores each way; with the paper's α, the α's of the agents before: 1 from Alice, 2 from bob.
    n, extra = dm.data.labels["train"].shape[0], 4 * 3 if alpha == "paper" else 0
    assert [r["interchange_bytes"] for r in records] == [n + 2 * 4 * n + extra, 2 * 4 * n + extra]


@pytest.mark.parametrize("alpha", ["paper", "exact"])
def test_longer_chains_send_the_round_start_where_eq_13_needs_it(tiny, alpha):
    cfg = tiny(
        method="ascii",
        **{
            "data.organizations": 4,
            "learner.model": ["tree"],
            "learner.max_depth": 2,
            "run.rounds": 2,
            "ascii.alpha": alpha,
        },
    )
    dm = TabularDataModule("wine", organizations=4)
    dm.setup()
    protocol = build_protocol(cfg, dm.data)
    sent = []
    protocol.federation.channel.tap = lambda m: sent.append(m) or m
    protocol.run_round()
    protocol.run_round()
    carried = [(m.round, m.receiver) for m in sent if isinstance(m, IgnoranceScores) and m.round_start is not None]
    # round 1 starts from the public w = 1; in round 2 org3 produced the start, org1 and org2 must be told.
    # The exact α needs the received scores only: nothing rides along.
    assert carried == ([(2, "org1"), (2, "org2")] if alpha == "paper" else [])


@pytest.mark.parametrize("alpha", ["paper", "exact"])
def test_alpha_stop_fires_and_discards_the_model(alpha):
    # B is wrong on every row: α_B = −∞ ≤ 0, the run stops and A's model alone votes
    protocol = fixed_chain([[0, 1, 0, 0], [1, 0, 1, 1]], [0, 1, 2, 0], k=3, alpha=alpha)
    record = protocol.run_round()
    assert protocol.stopped and "a1" in protocol.stopped and record["stopped"] == protocol.stopped
    assert record["alphas"][1] == 0.0 and protocol.federation.models(1)[1].models == 0
    torch.testing.assert_close(protocol.F["train"], math.log(6) * samme_code(torch.tensor([0, 1, 0, 0]), 3))


@pytest.mark.slow
def test_runner_stops_at_alpha_below_zero(tiny):
    # the paper's α stops this run in round 1; the exact one (SAMME's stop, r̄ ≤ 1/K) runs all 8 rounds
    cfg = tiny(
        method="ascii",
        **{
            "data.organizations": 6,
            "learner.model": ["tree"],
            "learner.max_depth": 1,
            "run.rounds": 8,
            "ascii.alpha": "paper",
        },
    )
    results = train(cfg, verbose=False)
    assert results["rounds"][-1]["stopped"].startswith("alpha <= 0")
    assert len(results["rounds"]) < 9


def test_cv_stop_and_its_validation_choice(tiny):
    cfg = tiny(
        method="ascii",
        **{
            "data.organizations": 2,
            "learner.model": ["tree"],
            "learner.max_depth": 1,
            "run.rounds": 30,
            "data.val_fraction": 0.5,
        },
    )
    cfg.ascii.stop = "cv"
    results = train(cfg, verbose=False, write=False)
    last = results["rounds"][-1]
    assert last["stopped"].startswith("validation accuracy did not improve")
    vals = [r["metrics"]["val"] for r in results["rounds"]]
    assert vals[-1] <= max(vals[:-1]) and results["value_selection"] == "validation"
    with pytest.raises(VCLInputError, match="ascii.stop=cv needs a validation split"):
        check_config(tiny(method="ascii", **{"ascii.stop": "cv"}))


@pytest.mark.parametrize(
    "method, alpha", [("ascii_random", "paper"), ("ascii_random", "exact"), ("ensemble_adaboost", "exact")]
)
def test_resume_equals_uninterrupted_run(tiny, tmp_path, crash_at, method, alpha):
    kw = dict(
        method=method,
        **{
            "data.organizations": 3,
            "learner.model": ["tree"],
            "learner.max_depth": 2,
            "run.rounds": 4,
            "ascii.alpha": alpha,
        },
    )
    full = train(tiny(out=str(tmp_path / "full"), **kw), verbose=False)
    cfg = tiny(out=str(tmp_path / "cut"), **kw)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, verbose=False, callbacks=[RoundCheckpoint(), crash_at(2)])
    resumed = train(cfg, resume=True, verbose=False)
    assert [r["metrics"] for r in resumed["rounds"]] == [r["metrics"] for r in full["rounds"]]
    assert [r["alphas"] for r in resumed["rounds"][1:]] == [r["alphas"] for r in full["rounds"][1:]]
    assert resumed["bytes_sent"] == full["bytes_sent"]


@pytest.mark.parametrize("method", ["ascii", "ensemble_adaboost"])
def test_prediction_stage_from_checkpointed_agents_matches_the_running_votes(tiny, method):
    cfg = tiny(
        method=method,
        **{
            "data.organizations": 3,
            "learner.model": ["tree", "logistic", "linear"],
            "learner.max_depth": 2,
            "run.rounds": 2,
        },
    )
    dm = TabularDataModule("wine", organizations=3)
    dm.setup()
    trained = build_protocol(cfg, dm.data)
    trained.run_round()
    trained.run_round()
    restored = build_protocol(cfg, dm.data)
    restored.load_state_dict(trained.state_dict())
    for name, view in zip(restored.federation.names, dm.data.views, strict=True):
        restored.federation.transport.party(name).add_rows("new", view.splits["test"])  # at the party itself
    torch.testing.assert_close(restored.predict("new"), trained.F["test"])


def test_variants_and_references_on_four_agent_blobs(tiny):
    """The paper's Fig. 3a setting, small: ASCII far above Single and near the Oracle within a few rounds."""
    kw = {
        "data.dataset": "ascii_blobs",
        "data.organizations": 4,
        "learner.model": ["forest"],
        "learner.n_trees": 10,
        "learner.max_depth": 4,
        "run.rounds": 4,
    }
    res = {
        m: train(tiny(method=m, **{"data.synthetic_test": 2000}, **kw), verbose=False, write=False)["value"]
        for m in ("ascii", "single", "oracle")
    }
    assert res["ascii"] > res["single"] + 0.05 and res["ascii"] >= res["oracle"] - 0.03


def test_classifiers_need_sample_weights_or_resampling(tiny):
    x, y = torch.randn(40, 3), torch.randint(0, 3, (40,))
    with pytest.raises(VCLInputError, match="ascii.resample"):
        SklearnClassifier(KNeighborsClassifier()).fit(x, y, torch.ones(40))
    with pytest.raises(VCLInputError, match="takes no sample_weight"):
        check_config(tiny(method="ascii", **{"learner.model": ["sklearn:sklearn.neighbors.KNeighborsClassifier"]}))
    cfg = tiny(method="ascii", **{"data.organizations": 2, "run.rounds": 2, "ascii.resample": True})
    cfg.learner.model = ["sklearn:sklearn.neighbors.KNeighborsClassifier"]
    assert train(cfg, verbose=False, write=False)["value"] > 0.5
    # the weighted resample follows the weights: rows with zero weight are never drawn
    w = torch.zeros(40)
    w[:10] = 1.0
    est = SklearnClassifier(KNeighborsClassifier(n_neighbors=1), seed=0, resample=True).fit(x, y, w)
    drawn = {tuple(r) for r in est.fitted_._fit_X.tolist()}
    assert drawn <= {tuple(r) for r in x[:10].tolist()} and len(drawn) > 1


def test_net_classifier_weighted_cross_entropy_follows_the_weights():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(60, 2, generator=gen)
    y = (x[:, 0] > 0).long()
    flipped = 1 - y
    w = torch.ones(60)
    w[:30] = 0.0  # the first half says "flipped", with no weight
    labels = torch.cat([flipped[:30], y[30:]])
    net = NetClassifier(2, 2, epochs=200, milestones=(150,), seed=0).fit(x, labels, w)
    assert (net.predict(x[30:]) == y[30:]).float().mean() > 0.9


def test_ascii_config_errors(tiny):
    with pytest.raises(VCLInputError, match="is not a classifier"):
        check_config(tiny(method="ascii", **{"learner.model": ["gb-svm"]}))
    with pytest.raises(VCLInputError, match="which is ASCII; methods of different families"):
        check_config(tiny(method="ascii", compare=["gal"]))
    with pytest.raises(VCLInputError, match="is for classification"):
        train(
            tiny(method="ascii", **{"data.dataset": "diabetes", "learner.model": ["tree"]}), verbose=False, write=False
        )
    with pytest.raises(VCLInputError, match="compare lists 'alone' .* ASCII's own: ascii, .* single, oracle"):
        check_config(tiny(method="ascii", compare=["alone"]))  # a name means one method, whatever runs beside it
    assert check_config(tiny(method="ascii", compare=["single", "oracle", "ascii_simple"])).name == "ASCII"
    unset = tiny(method="ascii", compare=None)
    assert compare_methods(unset) == ["single"] and check_config(unset).name == "ASCII"  # unset: its reference
    with pytest.raises(VCLInputError, match="ascii.alpha=literal is not valid; it takes one of exact, paper"):
        check_config(tiny(method="ascii", **{"ascii.alpha": "literal"}))


def test_ascii_datasets():
    blobs = TabularDataModule("ascii_blobs", organizations=4, synthetic_train=100, synthetic_test=300)
    blobs.setup()
    assert [v.num_features for v in blobs.data.views] == [2, 2, 2, 2]
    assert {s: len(y) for s, y in blobs.data.labels.items()} == {"train": 100, "test": 300}
    assert blobs.data.num_classes == 10
    wide = TabularDataModule("ascii_blobs_redundant", organizations=2, synthetic_train=50, synthetic_test=50)
    wide.setup()
    assert [v.num_features for v in wide.data.views] == [100, 100]
    halves = TabularDataModule("digits_halves")
    halves.setup()
    left, right = halves.data.views
    assert left.num_features == right.num_features == 32
    assert all(int(c.split("_")[-1]) < 4 for c in left.columns) and all(
        int(c.split("_")[-1]) >= 4 for c in right.columns
    )


def test_fig1_toy_is_nine_blobs_on_a_grid_with_one_feature_per_agent():
    toy = TabularDataModule("ascii_blobs9", organizations=2, synthetic_train=90, synthetic_test=180)
    toy.setup()
    assert [v.num_features for v in toy.data.views] == [1, 1]
    assert {s: len(y) for s, y in toy.data.labels.items()} == {"train": 90, "test": 180}
    assert toy.data.num_classes == 9
    from vcl.datamodules.sources import synthetic_blobs

    table = synthetic_blobs("ascii_blobs9", 900, 0, seed=0)
    centres = np.array([table.X[table.y == k].mean(0) for k in range(9)])
    grid = np.array([(a, b) for a in (-5, 0, 5) for b in (-5, 0, 5)])
    assert np.abs(centres - grid).max() < 0.5  # class 3i + j at (5(i - 1), 5(j - 1))


def _fig1_records():
    points = {"features": ["x1", "x0"], "x1": [-5.0, 0.0, 5.0, 0.1], "x0": [5.0, 0.0, -5.0, 4.9], "label": [0, 4, 8, 1]}
    single = {"figure": "fig1", "seed": 0, "method": "single", "variant": "single", "points": points,
              "panels": [{"round": 3, "accuracy": 0.25, "prediction": [0, 1, 2, 3]}]}  # fmt: skip
    ascii_run = {"figure": "fig1", "seed": 0, "method": "ascii", "variant": "ascii[exact]", "points": points,
                 "panels": [{"round": 1, "accuracy": 0.5, "prediction": [0, 4, 2, 3]},
                            {"round": 3, "accuracy": 1.0, "prediction": [0, 4, 8, 1]}]}  # fmt: skip
    return [ascii_run, single, {"figure": "fig3", "seed": 0}]


def test_draw_fig1_writes_a_png_from_hand_made_records(tmp_path):
    from tests.helpers import benchmark

    bench = benchmark("ascii")
    records = _fig1_records()
    _, panels = bench.fig1_panels(records)
    assert [(title, p["round"]) for title, p in panels] == [
        ("A alone (Single), round 3", 3),
        ("ASCII (ascii[exact]), round 1", 1),
        ("ASCII (ascii[exact]), round 3", 3),
    ]
    path = tmp_path / "fig1.png"
    bench.draw_fig1(records, path, dpi=40)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bench.draw_fig1([{"figure": "fig3", "seed": 0}], tmp_path / "none.png")  # no fig1 records: nothing drawn
    assert not (tmp_path / "none.png").exists()


def test_fig1_run_keeps_the_predictions_train_py_predict_gives():
    """Two rounds on the toy: each panel's predicted labels give the accuracy of the run's own curve."""
    from tests.helpers import benchmark

    record = benchmark("ascii").fig1_run("ascii", seed=0, rounds=2)
    points, panels = record["points"], record["panels"]
    assert [p["round"] for p in panels] == [1, 2] and len(points["label"]) == 2000
    assert sorted(points["features"]) == ["x0", "x1"] and all(len(points[c]) == 2000 for c in points["features"])
    for panel in panels:
        right = np.mean(np.array(panel["prediction"]) == np.array(points["label"]))
        assert right == pytest.approx(panel["accuracy"]) == pytest.approx(record["curve"][panel["round"]])
