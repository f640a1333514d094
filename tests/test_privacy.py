"""Privacy on residuals (Laplace, interval privacy) and faulty organizations (GAL Section 4.5)."""

import pytest
import torch
from vcl.datamodules import TabularDataModule

from vcl.coordinator.assembly import build_protocol
from vcl.engine.privacy import IntervalPrivacy, LaplaceMechanism
from vcl.methods.gal.assistance import assistance_weights
from vcl.methods.messages import FittedValues, PseudoResidual


def test_laplace_noise_scale_matches_quantile_range_over_alpha():
    values = torch.randn(200_000, generator=torch.Generator().manual_seed(0))
    mech = LaplaceMechanism(alpha=2.0)
    out = mech(values, torch.Generator().manual_seed(1))
    a, b = torch.quantile(values[:16_000_000], torch.tensor([0.025, 0.975]))
    noise = out - values.clamp(a, b)
    expected = float((b - a) / 2.0)
    assert float(noise.abs().mean()) == pytest.approx(expected, rel=0.02)  # E|Laplace(s)| = s
    assert float(noise.mean()) == pytest.approx(0.0, abs=0.02)


def test_interval_privacy_sends_one_of_the_two_transforms():
    g = torch.Generator().manual_seed(0)
    y = torch.randn(1000, generator=g)
    t = torch.rand(1000, generator=g) * 2 - 1
    a, b = torch.tensor(-1.0), torch.tensor(1.0)
    out = IntervalPrivacy.transform(y, t, a, b)
    assert torch.equal(out[y < t], (2 * t - b)[y < t]) and torch.equal(out[y >= t], (2 * t - a)[y >= t])


def test_interval_privacy_is_unbiased_inside_the_interval():
    grid = torch.linspace(-1, 1, 101)
    y = grid.repeat(4000)
    out = IntervalPrivacy()(y, torch.Generator().manual_seed(3)).view(4000, 101)
    a, b = torch.quantile(y, torch.tensor([0.025, 0.975]))
    torch.testing.assert_close(out.mean(0), grid.clamp(a, b), atol=0.06, rtol=0)


def one_private_round(cfg):
    """One GAL round on wine with 3 organizations: (clean residual, residual each receiver got, messages, record)."""
    dm = TabularDataModule("wine", organizations=3, feature_seed=cfg.run.seed)
    dm.setup()
    p = build_protocol(cfg, dm.data)
    clean = p.task.pseudo_residual(p.F["train"], p.labels["train"])
    sent = []
    p.federation.channel.tap = lambda m: sent.append(m) or m
    record = p.run_round()
    residuals = {m.receiver: m.values for m in sent if isinstance(m, PseudoResidual)}
    return clean, residuals, sent, record


@pytest.mark.parametrize("privacy", ["residual_laplace", "ip"])
def test_privacy_noise_never_touches_what_alice_uses(tiny, privacy):
    clean, residuals, sent, record = one_private_round(
        tiny(**{"data.organizations": 3, "gal.privacy": privacy, "run.rounds": 1})
    )
    assert torch.equal(residuals["alice"], clean)  # Alice fits her own model on the clean residual
    assert torch.equal(residuals["org1"], residuals["org2"])  # one perturbed broadcast
    assert not torch.allclose(residuals["org1"], clean, atol=1e-3)
    fitted = torch.stack([m.values["train"] for m in sent if isinstance(m, FittedValues)])
    # the assistance weights were fitted against the clean residual
    torch.testing.assert_close(torch.tensor(record["weights"]), assistance_weights(fitted, clean, "l2"))


@pytest.mark.parametrize("privacy", ["residual_laplace", "ip"])
def test_privacy_scope_all_gives_alice_the_perturbed_broadcast_but_keeps_her_weights_clean(tiny, privacy):
    same = {"data.organizations": 3, "gal.privacy": privacy, "gal.privacy_secret": 7, "run.rounds": 1}  # one secret
    cfg = tiny(**same, **{"gal.privacy_scope": "all"})
    clean, residuals, sent, record = one_private_round(cfg)
    assert torch.equal(residuals["alice"], residuals["org1"]) and torch.equal(residuals["org1"], residuals["org2"])
    assert not torch.allclose(residuals["alice"], clean, atol=1e-3)  # the authors' code: Alice fits it too
    fitted = torch.stack([m.values["train"] for m in sent if isinstance(m, FittedValues)])
    torch.testing.assert_close(torch.tensor(record["weights"]), assistance_weights(fitted, clean, "l2"))
    # the same broadcast as with scope "others": only Alice's own target differs
    _, broadcast, _, _ = one_private_round(tiny(**same))
    assert torch.equal(broadcast["org1"], residuals["org1"]) and torch.equal(broadcast["alice"], clean)


@pytest.mark.parametrize("draws", ["per_round", "repeated"])
def test_repeated_draws_send_the_same_standard_laplace_noise_every_round(tiny, draws):
    """gal.privacy_draws=repeated: round 2's noise is round 1's draw, scaled to round 2's bounds (as the GAL
    authors' code, which reseeds numpy whenever it makes a data loader); per_round draws anew."""
    cfg = tiny(**{"data.organizations": 3, "gal.privacy": "residual_laplace", "gal.privacy_draws": draws,
                  "run.rounds": 2})  # fmt: skip
    dm = TabularDataModule("wine", organizations=3, feature_seed=cfg.run.seed)
    dm.setup()
    p = build_protocol(cfg, dm.data)
    mechanism, standard, scales = LaplaceMechanism(), [], []
    for _ in range(2):
        clean = p.task.pseudo_residual(p.F["train"], p.labels["train"])
        sent = []
        p.federation.channel.tap = lambda m, sent=sent: sent.append(m) or m
        p.run_round()
        got = next(m.values for m in sent if isinstance(m, PseudoResidual) and m.receiver == "org1")
        a, b = torch.quantile(clean.flatten(), torch.tensor([0.025, 0.975], dtype=clean.dtype))
        scales.append(float(mechanism.scale(clean)))
        standard.append((got - clean.clamp(a, b)) / scales[-1])
    assert scales[0] != pytest.approx(scales[1], rel=1e-3)  # round 1 moved F: the bounds, so the scale, changed
    assert torch.allclose(standard[0], standard[1], atol=1e-4) == (draws == "repeated")


def test_privacy_scope_is_checked(tiny):
    from vcl.coordinator.assembly import check_config
    from vcl.errors import VCLInputError

    with pytest.raises(VCLInputError, match="privacy_scope"):
        check_config(tiny(**{"gal.privacy": "residual_laplace", "gal.privacy_scope": "alice"}))


@pytest.mark.parametrize("half", ["half", "last_half"])
def test_noisy_organizations_get_smaller_assistance_weights(tiny, half):
    cfg = tiny(**{"data.organizations": 4, "gal.noise_sigma": 5.0, "gal.noisy_organizations": [half], "run.rounds": 3})
    dm = TabularDataModule("wine", organizations=4, feature_seed=cfg.run.seed)
    dm.setup()
    p = build_protocol(cfg, dm.data)
    sigmas = torch.tensor([p.federation.transport.party(n).output_noise for n in p.federation.names])
    noisy = sigmas > 0
    assert sorted(sigmas.tolist()) == [0.0, 0.0, 5.0, 5.0]
    if half == "last_half":  # the authors' code's fixed half
        assert noisy.tolist() == [False, False, True, True]
    weights = torch.tensor([p.run_round()["weights"] for _ in range(3)]).mean(0)
    assert weights[noisy].max() < 0.5 * weights[~noisy].min()


def test_the_random_half_is_drawn_per_seed_as_in_the_paper():
    """``half``: M − M//2 organizations drawn from the run seed, Alice among the candidates; seeds differ."""
    from vcl.methods.columns import organization_set

    halves = [organization_set(["half"], 4, "gal.noisy_organizations", seed) for seed in range(40)]
    assert all(len(h) == 2 for h in halves) and len(organization_set(["half"], 5, "k", 0)) == 3
    assert halves[0] == organization_set(["half"], 4, "gal.noisy_organizations", 0)  # the same seed, the same half
    assert len({frozenset(h) for h in halves}) == 6  # every one of the 4-choose-2 halves occurs
    assert any(0 in h for h in halves) and organization_set(["last_half"], 4, "k", 7) == {2, 3}
    assert organization_set(["half"], 1, "k", 0) == organization_set(["last_half"], 1, "k", 0) == set()


def test_noninformative_organizations_see_only_noise(tiny):
    cfg = tiny(**{"data.organizations": 4, "gal.noninformative_organizations": [3]})
    dm = TabularDataModule("wine", organizations=4, feature_seed=cfg.run.seed)
    dm.setup()
    p = build_protocol(cfg, dm.data)
    party = p.federation.transport.party  # the parties in this process, looked at from the test
    blank, real = party("org3").view, dm.data.views[3]
    assert blank.columns == real.columns and blank.splits["train"].shape == real.splits["train"].shape
    assert not torch.allclose(blank.splits["train"], real.splits["train"])
    assert torch.equal(party("org2").view.splits["train"], dm.data.views[2].splits["train"])


@pytest.mark.parametrize("privacy", ["dp", "residual_laplace"])
def test_alices_secret_is_in_her_checkpoint_not_in_the_parties_config_and_a_resume_draws_the_same(
    tiny, crash_at, privacy
):
    """The secret is drawn fresh; the resumed process draws another until it reads hers from the checkpoint (dp:
    the privatized labels are drawn again from it, in the tensors the protocol holds)."""
    from vcl.callbacks import RoundCheckpoint

    from vcl.config import RunConfig, config_integers, party_copy
    from vcl.coordinator.runner import train
    from vcl.storage.checkpoints import load_checkpoint

    cfg = tiny(**{"gal.privacy": privacy, "gal.privacy_epsilon": 0.5, "run.rounds": 3})
    with pytest.raises(KeyboardInterrupt):
        train(cfg, verbose=False, callbacks=[RoundCheckpoint(), crash_at(2)])
    secret = load_checkpoint(cfg.run_dir / "checkpoints" / "last.ckpt")["protocol"]["federation"]["noise_secret"]
    resumed = train(cfg, verbose=False, resume=True)
    again = train(tiny(**{"gal.privacy": privacy, "gal.privacy_epsilon": 0.5, "run.rounds": 3,
                          "gal.privacy_secret": secret}), write=False)  # fmt: skip
    assert [r["metrics"] for r in resumed["rounds"]] == [r["metrics"] for r in again["rounds"]]
    given = tiny(**{"gal.privacy": privacy, "gal.privacy_secret": secret})
    assert party_copy(given.to_dict())["gal"]["privacy_secret"] == 0 and given.gal.privacy_secret == secret
    assert secret not in config_integers(party_copy(given.to_dict()))
    assert RunConfig.from_dict(party_copy(given.to_dict())).gal.privacy_secret == 0


# --- gal.privacy dp: label DP once, a guarantee for the data set -------------------------------------------------
def test_label_privacy_of_two_neighbouring_label_sets_differs_in_the_persons_row_alone():
    """The draws are made for every row whatever its label: labels that differ in one person give privatized labels
    that differ in that row alone (classification and regression)."""
    from vcl.engine.privacy import LabelPrivacy

    g = torch.Generator().manual_seed(0)
    for mechanism, y in (
        (LabelPrivacy(0.5, 4), torch.randint(0, 4, (500,), generator=g)),
        (LabelPrivacy(0.5, None, (0.0, 2.0)), 2 * torch.rand(500, generator=g)),
    ):
        other = y.clone()
        other[7] = (y[7] + 1) % 4 if y.dtype == torch.int64 else y[7] + 0.5
        a, b = (mechanism(v, torch.Generator().manual_seed(3)) for v in (y, other))
        keep = torch.ones(500, dtype=torch.bool)
        keep[7] = False
        assert torch.equal(a[keep], b[keep]) and not torch.equal(a, y)


def test_randomized_responses_epsilon_by_hand_and_by_the_accountant():
    """K = 4, ε = 1: a label is kept with p = e/(e + 3) and sent as each other class with (1 − p)/3, so the largest
    ratio of an output's chances under two labels is p / ((1 − p)/3) = e: ε = 1 exactly. The PLD accountant's ε at
    δ = 1e-5 is at most that; the frequencies of a large draw match p."""
    import math

    from vcl.audit.budget import label_budget
    from vcl.engine.privacy import LabelPrivacy
    from vcl.errors import VCLInputError

    mechanism = LabelPrivacy(1.0, 4)
    p = mechanism.keep
    assert math.log(p / ((1 - p) / 3)) == pytest.approx(1.0, abs=1e-12)
    assert 0.95 <= label_budget(1.0, 4)["epsilon"] <= 1.001  # the accountant discretizes, pessimistically
    assert 0.95 <= label_budget(1.0, None)["epsilon"] <= 1.001  # Laplace, sensitivity high − low, scale / ε
    y = torch.zeros(200_000, dtype=torch.int64)
    out = mechanism(y, torch.Generator().manual_seed(0))
    assert float((out == 0).double().mean()) == pytest.approx(p, abs=0.005)
    assert torch.bincount(out, minlength=4)[1:].double().div(len(y)).sub((1 - p) / 3).abs().max() < 0.005
    with pytest.raises(VCLInputError, match="gal.label_bounds"):
        LabelPrivacy(1.0, None)


def test_a_label_dp_run_sends_what_its_privatized_labels_decide(tiny):
    """Two data sets that differ in one person's label, whose privatized labels are the same, give the same messages
    bit for bit over two rounds (the run reads nothing of the labels but their privatized copy); a neighbour whose
    privatized label differs changes them (so the comparison can fail)."""
    from dataclasses import replace

    from vcl.engine.loop import seed_for
    from vcl.engine.privacy import LabelPrivacy
    from vcl.methods.gal.coordinator import LABELS

    cfg = tiny(**{"data.organizations": 3, "gal.privacy": "dp", "gal.privacy_epsilon": 0.2,
                  "gal.privacy_secret": 9, "run.rounds": 2})  # fmt: skip
    dm = TabularDataModule("wine", organizations=3, feature_seed=cfg.run.seed)
    dm.setup()
    data = dm.data

    def sent(data):
        torch.manual_seed(0)
        p = build_protocol(cfg, data)
        out = []
        p.federation.channel.tap = lambda m: out.append(m) or m
        for _ in range(2):
            p.run_round()
        return [(type(m).__name__, m.receiver, m.values) for m in out if isinstance(m, PseudoResidual)]

    def privatized(y):
        return LabelPrivacy(0.2, data.num_classes)(y, torch.Generator().manual_seed(seed_for(9, LABELS, 0)))

    y = data.labels["train"]
    base = privatized(y)
    neighbours = {}
    for i in range(len(y)):
        for c in range(data.num_classes):
            if c != int(y[i]):
                changed = y.clone()
                changed[i] = c
                neighbours.setdefault(bool(privatized(changed)[i] == base[i]), changed)
    assert set(neighbours) == {True, False}
    plain = sent(data)
    assert len(plain) == 6  # three receivers, two rounds
    for same, labels in neighbours.items():
        other = sent(replace(data, labels={**data.labels, "train": labels}))
        equal = all(a[:2] == b[:2] and torch.equal(a[2], b[2]) for a, b in zip(plain, other, strict=True))
        assert equal is same


def test_round_dp_releases_differ_in_the_persons_row_alone_and_alice_reads_nothing_else(tiny):
    """gal.privacy dp_residuals, two data sets that differ in one person's label: given the same releases so far,
    each round's clean residual differs in that row alone, by at most the sensitivity 2 in L1, and Alice's state (F,
    the weights, η) and every message are the same bit for bit: she computes them from what she released only."""
    from dataclasses import replace

    from vcl.engine.privacy import BoundedResidualLaplace

    cfg = tiny(**{"data.organizations": 3, "gal.privacy": "dp_residuals", "gal.privacy_epsilon": 4.0,
                  "gal.privacy_secret": 9, "run.rounds": 3})  # fmt: skip
    dm = TabularDataModule("wine", organizations=3, feature_seed=cfg.run.seed)
    dm.setup()
    y = dm.data.labels["train"]
    changed = y.clone()
    changed[5] = (y[5] + 1) % dm.data.num_classes

    def rounds(labels, releases=None):
        torch.manual_seed(0)
        p = build_protocol(cfg, replace(dm.data, labels={**dm.data.labels, "train": labels}))
        assert isinstance(p.federation.privacy, BoundedResidualLaplace) and float(p.prior.abs().sum()) == 0.0
        cleans, out, sent = [], [], []
        draw = p.federation.released

        def released(t, clean):
            cleans.append(clean.clone())
            out.append(draw(t, clean) if releases is None else releases[t - 1])
            return out[-1]

        p.federation.released = released
        p.federation.channel.tap = lambda m: sent.append(m) or m
        records = [p.run_round().as_dict() for _ in range(3)]
        return cleans, out, sent, records, p.F

    clean_a, released_a, sent_a, records_a, F_a = rounds(y)
    clean_b, _, sent_b, records_b, F_b = rounds(changed, released_a)
    for a, b in zip(clean_a, clean_b, strict=True):
        moved = (a - b).abs().sum(1)
        assert 0 < float(moved[5]) <= 2.0 + 1e-6 and float(moved.sum() - moved[5]) == 0.0
    assert all(torch.equal(F_a[s], F_b[s]) for s in F_a)
    assert [(r["eta"], r["weights"]) for r in records_a] == [(r["eta"], r["weights"]) for r in records_b]
    assert len(sent_a) == len(sent_b) and all(
        type(a) is type(b) and torch.equal(a.values, b.values) if isinstance(a, PseudoResidual) else True
        for a, b in zip(sent_a, sent_b, strict=True)
    )
    assert not torch.equal(clean_a[0], released_a[0]) and float((released_a[0] - clean_a[0]).abs().mean()) > 0.5


def test_round_dp_on_a_regression_target_starts_from_the_public_bounds_midpoint(tiny):
    """dp_residuals on diabetes: F⁰ is the midpoint of the public gal.label_bounds (no label read), so the first
    residual's signs tell the organizations something, and the run does better than from F⁰ = 0, whose signs are
    all +1 on a positive target."""
    from vcl.coordinator.runner import train

    base = {"data.dataset": "diabetes", "gal.privacy": "dp_residuals", "gal.privacy_epsilon": 8.0, "run.rounds": 4}
    from vcl.coordinator.assembly import datamodule_for

    cfg = tiny(**base, **{"gal.label_bounds": [0.0, 400.0]})
    dm = datamodule_for(cfg)
    dm.setup()
    p = build_protocol(cfg, dm.data)
    assert torch.all(p.prior == 200.0) and all(torch.all(f == 200.0) for f in p.F.values())
    p.federation.close()
    zero = train(tiny(**base), verbose=False, write=False)
    midpoint = train(tiny(**base, **{"gal.label_bounds": [0.0, 400.0]}), verbose=False, write=False)
    assert midpoint["value"] < 0.8 * zero["value"]


def test_round_dp_noise_is_calibrated_to_the_runs_epsilon_over_its_rounds():
    """The multiplier the run adds each round composes, over the planned rounds, to gal.privacy_epsilon; more rounds
    need more noise a round."""
    from vcl.audit.budget import laplace_budget, laplace_multiplier

    ten, three = laplace_multiplier(2.0, 10), laplace_multiplier(2.0, 3)
    assert ten > three > 0
    assert laplace_budget(ten, 10)["epsilon"] == pytest.approx(2.0, rel=1e-3)
    assert laplace_budget(three, 3)["epsilon"] == pytest.approx(2.0, rel=1e-3)
