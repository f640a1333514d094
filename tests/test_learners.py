"""Local learners: concurrent = sequential, fast loop = Lightning Trainer, scikit-learn adapter, ℓ_q."""

import pytest
import torch
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.neighbors import KNeighborsRegressor
from sklearn.svm import SVR
from vcl.models import (
    LearnerSettings,
    LinearRound,
    ResidualRegressor,
    SklearnRegressor,
    build_learner,
    fit_and_predict,
    fit_concurrently,
    fit_linear_rounds,
    learner_prototype,
)

from vcl.engine.losses import local_loss, local_loss_grad
from vcl.errors import VCLInputError


def _data(widths, n=64, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(n, w, generator=g) for w in widths]
    y = torch.randn(n, k, generator=g)
    return xs, y


@pytest.mark.parametrize(
    "hidden,batch_size,shuffle",
    [((), 1024, "rows"), ((), 16, "rows"), ((8,), 1024, "rows"), ((), 16, "blocks"), ((8,), 16, "blocks")],
)
def test_concurrent_fit_equals_sequential_fit(hidden, batch_size, shuffle):
    """Organizations fitted together take the batches each takes alone (under learner.shuffle blocks too: each
    its own rows' order, the blocks' order shared), to float rounding."""
    widths = [1, 3, 2, 5]
    xs, y = _data(widths)
    kw = dict(out_features=3, hidden=hidden, epochs=12, milestones=(6,), batch_size=batch_size, shuffle=shuffle)
    seq = [ResidualRegressor(w, seed=10 + i, **kw).fit(x, y) for i, (w, x) in enumerate(zip(widths, xs, strict=True))]
    con = fit_concurrently([ResidualRegressor(w, seed=10 + i, **kw) for i, w in enumerate(widths)], xs, y)
    for a, b, x in zip(seq, con, xs, strict=True):
        torch.testing.assert_close(a.predict(x), b.predict(x), rtol=1e-4, atol=1e-5)
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
            torch.testing.assert_close(pa, pb, rtol=1e-4, atol=1e-5)


SHUFFLES = ("rows", "blocks")


@pytest.mark.parametrize("hidden", [(), (8,)])
def test_the_blocks_order_fits_other_batches_than_the_rows_order_and_equal_ones_under_equal_seeds(hidden):
    xs, y = _data([3])
    kw = dict(out_features=3, hidden=hidden, epochs=4, milestones=(2,), batch_size=16)
    fits = {s: [ResidualRegressor(3, seed=5, shuffle=s, **kw).fit(xs[0], y) for _ in range(2)] for s in SHUFFLES}
    for a, b in fits.values():  # reproducible from the seed
        assert all(torch.equal(pa, pb) for pa, pb in zip(a.parameters(), b.parameters(), strict=True))
    rows, blocks = fits["rows"][0], fits["blocks"][0]
    assert not torch.allclose(rows.predict(xs[0]), blocks.predict(xs[0]))


@pytest.mark.parametrize("hidden", [(), (8,)])
def test_permutations_drawn_a_block_of_epochs_at_a_time_train_the_same_bits(monkeypatch, hidden):
    """Organizations fitted together draw their epochs' permutations in blocks bounded in bytes (one epoch a block
    here): each generator continues its own stream, so the fit is the one that drew every epoch at once."""
    import vcl.engine.concurrent as concurrent

    widths = [1, 3, 2]
    xs, y = _data(widths)
    kw = dict(out_features=3, hidden=hidden, epochs=5, milestones=(3,), batch_size=16)
    fits = []
    for budget in (2**30, 1):
        monkeypatch.setattr(concurrent, "PERMUTATION_BYTES", budget)
        fits.append(fit_concurrently([ResidualRegressor(w, seed=10 + i, **kw) for i, w in enumerate(widths)], xs, y))
    for a, b in zip(*fits, strict=True):
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
            assert torch.equal(pa, pb)


@pytest.mark.parametrize("hidden", [(), (8, 6)])
def test_stacked_linear_forward_equals_vmap(hidden):
    """Organizations fitted together: Linear/MLP stacks run as batched matrix products, equal bit for bit to vmap
    (outputs and gradients)."""
    import copy

    from torch.func import functional_call, stack_module_state, vmap

    from vcl.engine.concurrent import _stacked_forward

    nets = [ResidualRegressor(5, 3, hidden=hidden, seed=i).net for i in range(4)]
    x = torch.randn(4, 40, 5, generator=torch.Generator().manual_seed(0))
    base = copy.deepcopy(nets[0]).to("meta")
    results = []
    for forward in (_stacked_forward(base), vmap(lambda p, b, xi: functional_call(base, (p, b), (xi,)))):
        params, buffers = stack_module_state(nets)
        out = forward(params, buffers, x)
        out.pow(2).mean().backward()
        results.append([out.detach(), *(p.grad for p in params.values())])
    assert all(torch.equal(a, b) for a, b in zip(*results, strict=True))
    assert _stacked_forward(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3))) is None


@pytest.mark.parametrize("loss", ["l1", "l1.5", "l2", "l4", "ce"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("stacked", [False, True])
def test_local_loss_gradient_in_closed_form_equals_autograd(loss, weighted, stacked):
    g = torch.Generator().manual_seed(2)
    shape = (3, 20, 4) if stacked else (20, 4)
    pred = torch.randn(shape, generator=g, requires_grad=True)
    target = torch.softmax(torch.randn(shape, generator=g), -1) if loss == "ce" else torch.randn(shape, generator=g)
    w = torch.rand(shape[:-1], generator=g) if weighted else None
    local_loss(pred, target, loss, w).backward()
    torch.testing.assert_close(local_loss_grad(pred.detach(), target, loss, w), pred.grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("loss", ["l2", "l1.5"])
@pytest.mark.parametrize("batch_size", [1024, 40, 16, 8])
def test_linear_fits_with_closed_form_gradients_equal_autograd_fits(monkeypatch, loss, batch_size, weighted):
    """A linear learner's steps (alone, and organizations fitted together) take gradients in closed form, the bias
    as the weight of a column of ones never made; with autograd's instead (the MLP route) the fitted parameters are
    the same to float32 rounding, with sample weights and without."""
    widths = [1, 3, 2, 5]
    xs, y = _data(widths)
    kw = dict(out_features=3, epochs=12, milestones=(6,), batch_size=batch_size, loss=loss, grad_clip=0.5)
    w = torch.rand(64, generator=torch.Generator().manual_seed(1)) if weighted else None

    def fits():
        pairs = enumerate(zip(widths, xs, strict=True))
        alone = [ResidualRegressor(d, seed=10 + i, **kw).fit(x, y, w) for i, (d, x) in pairs]
        together = fit_concurrently([ResidualRegressor(d, seed=10 + i, **kw) for i, d in enumerate(widths)], xs, y, w)
        return [p.detach().clone() for learner in alone + together for p in learner.parameters()]

    closed_form = fits()
    monkeypatch.setattr(ResidualRegressor, "_linear_layer", lambda self: None)
    autograd = fits()
    for a, b in zip(closed_form, autograd, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert not torch.equal(closed_form[0], ResidualRegressor(1, seed=10, **kw).net[1].weight)  # they trained


@pytest.mark.parametrize(
    "kw",
    [
        dict(in_features=4),
        dict(in_features=1, loss="l1"),
        dict(in_features=7, hidden=(8, 6)),
        dict(in_features=(1, 8, 8), arch="cnn", widths=(4, 8)),
        dict(in_features=(5, 3), arch="lstm"),
    ],
)
def test_a_renewed_learner_is_a_new_one(kw):
    """``renewed(seed)`` (a round's learner copied from a prototype's modules) equals ``ResidualRegressor(seed=...)``:
    modules, parameters, buffers, hyper-parameters, training mode; and it shares nothing with another copy."""
    prototype = ResidualRegressor(out_features=3, seed=1, **kw).to("meta").eval()
    for seed in (7, 123456789):
        a, b = prototype.renewed(seed), ResidualRegressor(out_features=3, seed=seed, **kw)
        assert [type(m) for m in a.modules()] == [type(m) for m in b.modules()] and a.training
        assert dict(a.hparams) == dict(b.hparams)
        sa, sb = a.state_dict(), b.state_dict()
        assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    a, b = prototype.renewed(3), prototype.renewed(3)
    a.net.register_forward_hook(lambda *args: None)
    with torch.no_grad():
        next(a.parameters()).add_(1.0)
    assert not b.net._forward_hooks and not torch.equal(next(a.parameters()), next(b.parameters()))
    if isinstance(kw["in_features"], int):  # build_learner renews from its prototype of the kind
        for seed in (9, 5):
            built = build_learner("mlp", kw["in_features"], 3, "l2", seed, LearnerSettings(hidden=[8])).state_dict()
            new = ResidualRegressor(kw["in_features"], 3, hidden=(8,), seed=seed).state_dict()
            assert all(torch.equal(built[k], new[k]) for k in new)


@pytest.mark.parametrize("hidden", [(), (8,)])
def test_fit_and_predict_gives_each_learners_own_outputs(hidden):
    """Fitted together, every organization's outputs on each of its splits: what its fitted learner predicts."""
    widths = [1, 3, 2, 5]
    xs, y = _data(widths)
    tests, _ = _data(widths, n=17, seed=4)
    kw = dict(out_features=3, hidden=hidden, epochs=6, milestones=(3,), batch_size=16)
    learners = [ResidualRegressor(w, seed=10 + i, **kw) for i, w in enumerate(widths)]
    outputs = fit_and_predict(learners, [{"train": x, "test": t} for x, t in zip(xs, tests, strict=True)], y)
    alone = [ResidualRegressor(w, seed=10 + i, **kw).fit(x, y) for i, (w, x) in enumerate(zip(widths, xs, strict=True))]
    for m, learner in enumerate(alone):
        for split, x in (("train", xs[m]), ("test", tests[m])):
            torch.testing.assert_close(outputs[split][m], learner.predict(x), rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(outputs[split][m], learners[m].predict(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("widths", [[1, 3, 2, 5], [2, 2, 2, 2]])
@pytest.mark.parametrize("batch_size", [1024, 16])
def test_linear_rounds_fitted_unmade_equal_learners_made_and_fitted_together(batch_size, widths):
    """Linear learners of organizations of different widths (or equal ones: their starts drawn straight into one
    block), fitted together without being made (each keeps a LinearRound, its weight and bias): the same outputs,
    parameters, predictions and state_dict (it loads into the learner) as the learners ``build_learner`` makes,
    fitted together; and as each fitted alone."""
    seeds = [10, 11, 12, 13]
    xs, y = _data(widths)
    tests, _ = _data(widths, n=17, seed=4)
    inputs = [{"train": x, "test": t} for x, t in zip(xs, tests, strict=True)]
    settings = LearnerSettings(epochs=6, milestones=[3], batch_size=batch_size)
    prototypes = [learner_prototype("linear", (w,), 3, "l2", settings) for w in widths]
    assert all(p.linear_drawn for p in prototypes)
    rounds, outputs = fit_linear_rounds(prototypes, seeds, inputs, y)
    learners = [build_learner("linear", (w,), 3, "l2", s, settings) for w, s in zip(widths, seeds, strict=True)]
    made = fit_and_predict(learners, inputs, y)
    for split in ("train", "test"):
        assert torch.equal(outputs[split], made[split])
    for m, (model, learner) in enumerate(zip(rounds, learners, strict=True)):
        assert isinstance(model, LinearRound) and model.hparams == learner.hparams
        state, theirs = model.state_dict(), learner.state_dict()
        assert list(state) == list(theirs) and all(torch.equal(state[k], theirs[k]) for k in state)
        assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in learner.parameters())
        assert torch.equal(model.predict(tests[m]), learner.predict(tests[m]))
        alone = build_learner("linear", (widths[m],), 3, "l2", seeds[m], settings).fit(xs[m], y)
        torch.testing.assert_close(model.predict(tests[m]), alone.predict(tests[m]), rtol=1e-4, atol=1e-5)
        loaded = build_learner("linear", (widths[m],), 3, "l2", 0, settings)
        loaded.load_state_dict(state)
        assert torch.equal(loaded.predict(tests[m]), model.predict(tests[m]))
        for t in state.values():  # its own memory: a checkpoint of one organization holds no other's parameters
            assert t.untyped_storage().nbytes() == t.numel() * t.element_size()


def test_linear_start_drawn_into_given_tensors_is_the_learners_start():
    """A Linear prototype's start for a seed is what renewed(seed) holds before fitting, whether drawn into new
    tensors or into given ones (rows of a block, reusing one generator); a wrong shape or a strided target is
    refused rather than drawn in another order."""
    prototype = learner_prototype("linear", (3,), 2, "l2", LearnerSettings())
    made = prototype.renewed(7)
    block, generator = torch.zeros(2, 2, 3), torch.Generator().manual_seed(99)
    weight, bias = prototype.linear_start(7, out=(block[1], torch.empty(2)), generator=generator)
    for drawn in (prototype.linear_start(7), (weight, bias)):
        assert torch.equal(drawn[0], made._linear_layer().weight) and torch.equal(drawn[1], made._linear_layer().bias)
    assert torch.equal(block[1], weight) and not block[0].any()
    with pytest.raises(ValueError, match="contiguous"):
        prototype.linear_start(7, out=(torch.empty(3, 2).t(), torch.empty(2)))
    with pytest.raises(ValueError, match="shape"):
        prototype.linear_start(7, out=(torch.empty(2, 4), torch.empty(2)))


def test_fast_engine_equals_lightning_trainer():
    xs, y = _data([4], n=32)
    kw = dict(in_features=4, out_features=3, epochs=5, milestones=(3,), seed=1, accelerator="cpu")
    fast = ResidualRegressor(engine="fast", **kw).fit(xs[0], y)
    slow = ResidualRegressor(engine="trainer", **kw).fit(xs[0], y)
    torch.testing.assert_close(fast.predict(xs[0]), slow.predict(xs[0]), rtol=1e-4, atol=1e-5)


def test_fit_reduces_local_loss_and_respects_sample_weight():
    xs, y = _data([4], n=40)
    x = xs[0]
    model = ResidualRegressor(4, 3, seed=0)
    before = local_loss(model.predict(x), y, "l2")
    model.fit(x, y)
    assert local_loss(model.predict(x), y, "l2") < before
    w = torch.zeros(40)
    w[:5] = 1.0
    weighted = ResidualRegressor(4, 3, hidden=(32,), seed=0, epochs=300, milestones=(250,)).fit(x, y, w)
    err = (weighted.predict(x) - y).pow(2).mean(1)
    assert err[:5].mean() < 0.5 * err[5:].mean()


@pytest.mark.parametrize("hidden", [(), (32,)])
def test_sample_weights_follow_their_rows_in_the_blocks_order(hidden):
    """learner.shuffle blocks permutes each model's weights with its rows: weight on five rows fits those five."""
    xs, y = _data([4], n=40)
    w = torch.zeros(40)
    w[:5] = 1.0
    kw = dict(hidden=hidden, seed=0, epochs=300, milestones=(250,), batch_size=16, shuffle="blocks")
    weighted = ResidualRegressor(4, 3, **kw).fit(xs[0], y, w)
    err = (weighted.predict(xs[0]) - y).pow(2).mean(1)
    assert err[:5].mean() < 0.5 * err[5:].mean()


@pytest.mark.parametrize("loss", ["l1", "l1.5", "l2", "l4"])
def test_local_loss_is_mean_power_of_absolute_error(loss):
    pred, target = torch.tensor([[1.0, 2.0]]), torch.tensor([[0.0, 4.0]])
    q = float(loss[1:])
    assert local_loss(pred, target, loss).item() == pytest.approx((1 + 2**q) / 2)


def test_learner_loss_changes_the_fit():
    """ℓ1 fits the median, ℓ2 the mean: a constant model on skewed targets shows which loss it used."""
    x = torch.zeros(50, 1)
    y = torch.cat([torch.zeros(40, 1), torch.full((10, 1), 10.0)])
    kw = dict(epochs=400, milestones=(300,), grad_clip=0.0, lr=0.05, weight_decay=0.0)
    l1 = ResidualRegressor(1, 1, loss="l1", **kw).fit(x, y).predict(x[:1]).item()
    l2 = ResidualRegressor(1, 1, loss="l2", **kw).fit(x, y).predict(x[:1]).item()
    assert abs(l1) < 0.3 and l2 == pytest.approx(2.0, abs=0.3)


def test_sklearn_adapter_multi_output_and_sample_weight():
    xs, y = _data([3], n=50)
    svr = SklearnRegressor(SVR()).fit(xs[0], y)  # SVR is single-output: wrapped by MultiOutputRegressor
    assert svr.predict(xs[0]).shape == (50, 3)
    gb = SklearnRegressor(GradientBoostingRegressor(n_estimators=5), seed=3).fit(xs[0], y[:, :1], torch.ones(50))
    assert gb.predict(xs[0]).shape == (50, 1)
    restored = SklearnRegressor(SVR())
    restored.load_state_dict(svr.state_dict())
    torch.testing.assert_close(restored.predict(xs[0]), svr.predict(xs[0]))
    with pytest.raises(VCLInputError, match="takes no sample_weight"):
        SklearnRegressor(KNeighborsRegressor()).fit(xs[0], y, torch.ones(50))


def test_build_learner_names():
    s = LearnerSettings()
    assert isinstance(build_learner("linear", 3, 2, "l2", 0, s), ResidualRegressor)
    assert isinstance(build_learner("sklearn:sklearn.linear_model.Ridge", 3, 2, "l2", 0, s), SklearnRegressor)
    with pytest.raises(VCLInputError, match="learner.model='forest' is unknown"):
        build_learner("forest", 3, 2, "l2", 0, s)


@pytest.mark.parametrize("loss", ["l1.5", "l4"])
def test_gb_refuses_a_local_loss_it_cannot_fit(tiny, loss):
    from vcl.coordinator.assembly import check_config

    with pytest.raises(VCLInputError, match=f"learner.model=gb \\(organization 0\\) cannot fit gal.local_loss={loss}"):
        check_config(tiny(**{"learner.model": ["gb"], "gal.local_loss": [loss]}))
    with pytest.raises(VCLInputError, match="organization 1"):  # gb-svm: GB for organizations 0 and 1
        check_config(
            tiny(**{"data.organizations": 4, "learner.model": ["gb-svm"], "gal.local_loss": ["l1", loss, "l2", "l2"]})
        )
    check_config(
        tiny(**{"data.organizations": 4, "learner.model": ["gb-svm"], "gal.local_loss": ["l1", "l2", loss, loss]})
    )  # SVMs take it
    with pytest.raises(VCLInputError, match="cannot fit"):
        build_learner("gb", 3, 1, loss, 0, LearnerSettings())
    assert build_learner("gb", 3, 1, "l1", 0, LearnerSettings()).estimator.loss == "absolute_error"
    assert build_learner("gb", 3, 1, "l2", 0, LearnerSettings()).estimator.loss == "squared_error"


def test_a_learner_fitted_alone_trains_on_its_own_rows_without_a_copy():
    """The stacked fit of one MLP learner (M = 1) reads the learner's rows where they are."""
    from vcl.engine.concurrent import _padded

    x = torch.randn(50, 4)
    assert _padded([x], 4).data_ptr() == x.data_ptr()
    assert _padded([x, x], 4).data_ptr() != x.data_ptr()  # several: zero-padded into one stack
    learner = ResidualRegressor(4, 2, hidden=(8,), epochs=3).fit(x, torch.randn(50, 2))
    assert learner.stackable and torch.isfinite(learner.predict(x)).all()


@pytest.mark.parametrize("widths", [(3, 5, 2, 5), (4, 4, 4, 4)])
def test_organizations_fitted_together_round_after_round_hold_their_rows_once(widths):
    """Kept from round to round (``stacked``), the stack the linear fit reads becomes each organization's rows: its
    splits are views of their place in it (same numbers; the originals can go), the next round stacks nothing, and
    the outputs are those of a fit on the rows as given."""
    xs, y = _data(widths)
    tests, _ = _data(widths, n=17, seed=4)
    settings = LearnerSettings(epochs=3, milestones=[2], batch_size=8)
    prototypes = [learner_prototype("linear", (w,), 3, "l2", settings) for w in widths]
    given = [{"train": x.clone(), "test": t.clone()} for x, t in zip(xs, tests, strict=True)]
    held, stacked, bases = [{"train": x, "test": t} for x, t in zip(xs, tests, strict=True)], {}, None
    for _ in range(2):
        _, fresh = fit_linear_rounds(prototypes, [1, 2, 3, 4], given, y)
        _, kept = fit_linear_rounds(prototypes, [1, 2, 3, 4], held, y, stacked)
        assert all(torch.equal(fresh[s], kept[s]) for s in ("train", "test"))
        for split in ("train", "test"):
            stack = held[0][split]._base
            assert stack is not None and all(own[split]._base is stack for own in held)
            assert all(torch.equal(own[split], mine[split]) for own, mine in zip(held, given, strict=True))
        now = [held[0][s]._base for s in ("train", "test")]
        assert bases is None or all(a is b for a, b in zip(bases, now, strict=True))  # round 2 stacked nothing
        bases = now
    assert len(stacked) == 2


def test_a_party_built_on_the_device_its_view_is_on_shares_the_views_rows(tiny):
    """A GAL round of Linear organizations under the local transport: each organization's training rows, in the
    run's data as in its party, are one stack's (held once, not as the views and the stack)."""
    from vcl.coordinator.assembly import build_protocol
    from vcl.coordinator.runner import run_data

    config = tiny(**{"learner.model": "linear", "run.rounds": 1})
    data = run_data(config)
    rows = [v.splits["train"].clone() for v in data.views]
    build_protocol(config, data).run_round()
    stack = data.views[0].splits["train"]._base
    assert stack is not None and all(v.splits["train"]._base is stack for v in data.views)
    assert all(torch.equal(v.splits["train"], r) for v, r in zip(data.views, rows, strict=True))
