"""Deep learners: CNN and LSTM fit residuals, concurrent CNNs equal sequential ones, Deep Model Sharing, Interm,
and GAL runs on image patches and sequences that resume exactly."""

import pytest
import torch
from vcl.models import ResidualRegressor, SharedExtractorRegressor, fit_concurrently

from tests.helpers import TINY_CNN
from vcl.coordinator.runner import train
from vcl.engine.losses import local_loss

CNN = dict(arch="cnn", widths=(4, 8), epochs=15, batch_size=16, milestones=())


def test_cnn_and_lstm_fit_a_residual():
    g = torch.Generator().manual_seed(0)
    images = torch.randn(48, 1, 6, 4, generator=g)
    target = torch.stack([images[:, 0, :3].mean((1, 2)), images[:, 0, 3:].mean((1, 2))], 1)
    cnn = ResidualRegressor((1, 6, 4), 2, seed=0, **CNN)
    before = local_loss(cnn.predict(images), target, "l2")
    cnn.fit(images, target)
    assert local_loss(cnn.predict(images), target, "l2") < 0.5 * before
    seqs = torch.randn(40, 6, 3, generator=g)
    target = seqs[:, -2:, :1].mean(1)
    lstm = ResidualRegressor((6, 3), 1, arch="lstm", lstm_hidden=8, optimizer="adam", lr=0.02, epochs=40, milestones=())
    before = local_loss(lstm.predict(seqs), target, "l2")
    lstm.fit(seqs, target)
    assert local_loss(lstm.predict(seqs), target, "l2") < 0.5 * before


def test_concurrent_cnns_equal_sequential_ones():
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(40, 1, 4, 4, generator=g) for _ in range(3)]
    y = torch.randn(40, 3, generator=g)
    seq = [ResidualRegressor((1, 4, 4), 3, seed=5 + i, **CNN).fit(x, y) for i, x in enumerate(xs)]
    con = fit_concurrently([ResidualRegressor((1, 4, 4), 3, seed=5 + i, **CNN) for i in range(3)], xs, y)
    for a, b, x in zip(seq, con, xs, strict=True):
        torch.testing.assert_close(a.predict(x), b.predict(x), rtol=1e-4, atol=1e-4)
        for (name, ba), bb in zip(a.named_buffers(), b.buffers(), strict=True):  # BatchNorm statistics too
            torch.testing.assert_close(ba.float(), bb.float(), rtol=1e-4, atol=1e-4, msg=name)


def test_deep_model_sharing_adds_one_head_per_round_on_one_extractor():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(32, 1, 4, 4, generator=g)
    dms = SharedExtractorRegressor((1, 4, 4), 3, seed=0, **CNN)
    extractor = dms.extractor
    for t in range(1, 4):
        dms.fit(x, torch.randn(32, 3, generator=g))
        assert dms.rounds == t and dms.extractor is extractor
        assert dms(x).shape == (32, 3 * t)  # heads 1..t trained jointly on the residuals of rounds 1..t
    assert torch.equal(dms.round_model(2).predict(x), dms.predict(x))
    plain = ResidualRegressor((1, 4, 4), 3, seed=0, **CNN)
    assert dms.num_parameters() < 1.2 * sum(p.numel() for p in plain.parameters())  # vs 3× for three models


def _images(tiny, **kw):
    return tiny(**{**TINY_CNN, **kw})


def test_gal_with_dms_on_image_patches_keeps_one_extractor_per_organization(tiny):
    from vcl.coordinator.assembly import build_protocol, datamodule_for

    cfg = _images(tiny, **{"gal.dms": True, "run.rounds": 2})
    dm = datamodule_for(cfg)
    dm.setup()
    protocol = build_protocol(cfg, dm.data)
    protocol.run_round()
    protocol.run_round()
    assert [(r.models, r.shared) for r in protocol.federation.models(2)] == [(2, True)] * 4
    for org in map(protocol.federation.transport.party, protocol.federation.names):
        shared = org.shared_extractor
        assert shared.rounds == 2 and {id(m.learner) for _, m in org.kept_models()} == {id(shared)}
    outputs = protocol.federation.predictions("test", 2)
    assert outputs[0]["2"].shape == (len(dm.data.labels["test"]), 10)


@pytest.mark.slow
@pytest.mark.parametrize("dms", [False, True])
def test_resume_with_deep_learners_equals_uninterrupted_run(tiny, tmp_path, crash_at, dms):
    from vcl.callbacks import RoundCheckpoint

    full = train(_images(tiny, **{"run.rounds": 3, "gal.dms": dms}, out=str(tmp_path / "full")), verbose=False)
    cfg = _images(tiny, **{"run.rounds": 3, "gal.dms": dms}, out=str(tmp_path / "cut"))
    with pytest.raises(KeyboardInterrupt):
        train(cfg, verbose=False, callbacks=[RoundCheckpoint(), crash_at(2)])
    resumed = train(cfg, resume=True, verbose=False)
    assert [r["metrics"] for r in resumed["rounds"]] == [r["metrics"] for r in full["rounds"]]


def test_interm_and_late_run_on_image_patches(tiny):
    for method in ("interm", "late"):
        results = train(
            _images(tiny, method=method, **{"learner.epochs": 4, "learner.batch_size": 32}), verbose=False, write=False
        )
        assert results["value"] > 0.5, method  # ten classes: chance is 0.1


def test_gal_with_lstms_learns_on_sequences(tiny):
    cfg = _lstm(tiny, **{"data.sequence_size": 300, "learner.dropout": 0.3, "learner.epochs": 4, "run.rounds": 2})
    results = train(cfg, verbose=False, write=False)
    assert results["best_value"] > 0.65  # balanced binary labels: chance is 0.5


def _lstm(tiny, **kw):
    settings = {
        "data.dataset": "sequence_synthetic",
        "data.sequence_size": 200,
        "data.organizations": 4,
        "learner.model": ["lstm"],
        "learner.lstm_hidden": 8,
        "learner.dropout": 0.3,
        "learner.lr": 0.01,
        "learner.epochs": 2,
        "learner.batch_size": 32,
        "run.rounds": 3,
    }
    return tiny(**{**settings, **kw})


@pytest.mark.slow
@pytest.mark.parametrize("dms", [False, True])
def test_lstm_runs_with_dropout_are_reproducible(tiny, tmp_path, dms):
    first = train(_lstm(tiny, **{"gal.dms": dms}, out=str(tmp_path / "a")), verbose=False, write=False)
    torch.manual_seed(12345)  # whatever the global RNG holds, every draw comes from the run seed and the party
    torch.randn(7)
    second = train(_lstm(tiny, **{"gal.dms": dms}, out=str(tmp_path / "b")), verbose=False, write=False)
    assert [r["train_loss"] for r in first["rounds"]] == [r["train_loss"] for r in second["rounds"]]
    assert [r["metrics"] for r in first["rounds"]] == [r["metrics"] for r in second["rounds"]]
    other = train(_lstm(tiny, **{"gal.dms": dms, "run.seed": 1}, out=str(tmp_path / "c")), verbose=False, write=False)
    assert [r["train_loss"] for r in other["rounds"]] != [r["train_loss"] for r in first["rounds"]]


@pytest.mark.slow
@pytest.mark.parametrize("dms", [False, True])
def test_lstm_resume_with_dropout_equals_uninterrupted_run(tiny, tmp_path, crash_at, dms):
    from vcl.callbacks import RoundCheckpoint

    full = train(_lstm(tiny, **{"gal.dms": dms}, out=str(tmp_path / "full")), verbose=False)
    cfg = _lstm(tiny, **{"gal.dms": dms}, out=str(tmp_path / "cut"))
    with pytest.raises(KeyboardInterrupt):
        train(cfg, verbose=False, callbacks=[RoundCheckpoint(), crash_at(1)])
    torch.randn(11)  # a restarted process does not share the crashed one's global RNG state
    resumed = train(cfg, resume=True, verbose=False)
    assert [r["train_loss"] for r in resumed["rounds"]] == [r["train_loss"] for r in full["rounds"]]
    assert [r["metrics"] for r in resumed["rounds"]] == [r["metrics"] for r in full["rounds"]]


def test_interm_with_lstm_dropout_is_reproducible(tiny, tmp_path):
    first = train(_lstm(tiny, method="interm", out=str(tmp_path / "a")), verbose=False, write=False)
    torch.randn(5)
    second = train(_lstm(tiny, method="interm", out=str(tmp_path / "b")), verbose=False, write=False)
    assert [r["train_loss"] for r in first["rounds"]] == [r["train_loss"] for r in second["rounds"]]


def test_learners_with_dropout_are_not_vmapped_together():
    from vcl.models import concurrency_key

    plain = ResidualRegressor(6, 2, hidden=(8,), seed=0)
    dropped = ResidualRegressor(6, 2, hidden=(8,), seed=0)
    dropped.net[0].append(torch.nn.Dropout(0.2))  # the extractor of an MLP with dropout
    assert concurrency_key(plain) is not None and concurrency_key(dropped) is None


def test_cnn_pools_after_every_block_as_table_8_and_the_authors_variant_is_an_option(tiny):
    from vcl.models import LearnerSettings, build_learner, build_network

    from vcl.methods.columns import learner_settings

    def pools(net):
        return [m for m in net.modules() if isinstance(m, torch.nn.MaxPool2d)]

    paper = build_network("cnn", (1, 28, 28), 10)  # widths 64-128-256-512
    assert len(pools(paper)) == 4
    x = torch.randn(2, 1, 28, 28)
    assert paper[0][:-2](x).shape == (2, 512, 2, 2)  # every pool halves: 28 → 14 → 7 → 4 → 2
    assert len(pools(build_network("cnn", (1, 28, 28), 10, last_pool=False))) == 3
    settings = learner_settings(tiny(**{"learner.cnn_last_pool": False}), "gal")
    assert len(pools(build_learner("cnn", (1, 4, 4), 10, "l2", 0, settings).net)) == 3
    assert len(pools(build_learner("cnn", (1, 4, 4), 10, "l2", 0, LearnerSettings()).net)) == 4
    for shape in [(1, 1, 1), (1, 4, 2), (1, 4, 4), (3, 16, 8)]:  # patches smaller than 2⁴ still pass
        assert build_network("cnn", shape, 10, widths=(4, 8, 8, 8))(torch.randn(2, *shape)).shape == (2, 10)


def test_the_round_bar_counts_every_epoch_of_every_model_concurrent_or_not():
    """Sequential fits advance the bar one epoch at a time per model, fitted together M per epoch: the same count."""
    import io

    from rich.console import Console

    from vcl.engine import progress

    xs = [torch.randn(40, 1, 4, 4, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    y = torch.randn(40, 3, generator=torch.Generator().manual_seed(9))
    counts = []
    for concurrent in (False, True):
        ticks = []
        with progress.round_bar("round 1", console=Console(file=io.StringIO())):
            assert progress.active()
            progress._advance = ticks.append  # what the open bar receives (the bar resets it on closing)
            learners = [ResidualRegressor((1, 4, 4), 3, seed=i, **CNN) for i in range(3)]
            if concurrent:
                fit_concurrently(learners, xs, y)
            else:
                for learner, x in zip(learners, xs, strict=True):
                    learner.fit(x, y)
        counts.append(sum(ticks))
    assert counts == [3 * CNN["epochs"]] * 2
    assert not progress.active()  # closed with its round
    progress.advance(5)  # no bar: nothing happens
