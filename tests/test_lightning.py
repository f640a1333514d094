"""The suite's Lightning shape: data modules and per-party views are LightningDataModules, the torch learners
LightningModules that a bare Trainer trains, a user's own LightningModule as an organization's learner (both
engines, checkpoints and --resume), and the parties' Trainers' callbacks and TensorBoard loggers."""

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from vcl.callbacks import RoundCheckpoint
from vcl.datamodules import GridDataModule, OverlapDataModule, TabularDataModule
from vcl.models import LearnerSettings, NetClassifier, ResidualRegressor, SharedExtractorRegressor, build_learner
from vcl.models.user import one_optimizer

from tests.lightning_user import CountEpochs
from vcl.coordinator.runner import train
from vcl.engine.losses import local_loss
from vcl.errors import VCLInputError

ROOT = Path(__file__).resolve().parents[1]


def test_every_class_named_datamodule_is_a_lightning_datamodule():
    names = set()
    for path in ROOT.glob("*/*.py"):
        if path.parts[-2] in ("tests", ".venv") or path.parts[-2].startswith("."):
            continue
        names |= {(path, n) for n in re.findall(r"^class (\w*DataModule)\b", path.read_text(), re.M)}
    assert {n for _, n in names} >= {"TabularDataModule", "GridDataModule", "OverlapDataModule", "PartyDataModule"}
    for path, name in names:
        module = importlib.import_module(f"vcl.{path.parts[-2]}.{path.stem}")
        assert issubclass(getattr(module, name), pl.LightningDataModule), name


@pytest.mark.parametrize(("name", "shape"), [("linear", (5,)), ("mlp", (5,)), ("cnn", (1, 4, 4)), ("lstm", (3, 2))])
def test_the_torch_learners_are_lightning_modules_with_their_own_step_and_optimizer(name, shape):
    learner = build_learner(name, shape, 2, "l2", 0, LearnerSettings(widths=(4,), lstm_hidden=4))
    assert isinstance(learner, pl.LightningModule)
    x, y = torch.randn(6, *shape), torch.randn(6, 2)
    learner.eval()  # no dropout draws: the two calls see one network
    loss = learner.training_step((x, y, torch.ones(6)), 0)
    torch.testing.assert_close(loss, local_loss(learner(x), y, "l2"))
    conf = learner.configure_optimizers()
    assert isinstance(conf["optimizer"], torch.optim.SGD if name != "lstm" else torch.optim.Adam)
    for cls in (NetClassifier, SharedExtractorRegressor):
        assert issubclass(cls, pl.LightningModule)


def test_a_bare_trainer_trains_one_partys_view_and_learner():
    """Bob's view holds Bob's columns only, and the targets he is given (here: a GAL round-1 pseudo-residual,
    Alice's one-hot labels less their mean); Lightning's own Trainer fits a built-in learner on it."""
    dm = TabularDataModule("wine", organizations=4)
    dm.setup()
    alice, bob = dm.party(0), dm.party(1)
    assert bob.targets is None and bob.features["train"].shape[1] == len(dm.data.views[1].columns)
    torch.testing.assert_close(bob.features["test"], dm.data.views[1].splits["test"])
    y = alice.targets["train"]
    assert y.shape == (dm.data.labels["train"].shape[0], 3) and torch.equal(y.argmax(1), dm.data.labels["train"])
    residual = y - y.mean(0)
    bob = dm.party(1, targets=residual)
    x, target, weight = next(iter(bob.train_dataloader()))
    assert x.shape[1] == bob.features["train"].shape[1] and target.shape[1] == 3 and torch.all(weight == 1)
    model = ResidualRegressor(x.shape[1], 3, hidden=(16,), epochs=30, milestones=(), batch_size=32, seed=0)
    before = local_loss(model.predict(bob.features["train"]), residual, "l2")
    trainer = pl.Trainer(max_epochs=30, logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(model, bob)
    after = local_loss(model.predict(bob.features["train"]), residual, "l2")
    assert after < 0.5 * before


def test_dc_and_mpdl_party_views_hold_their_own_features_and_only_their_labels():
    grid = GridDataModule("dc_artificial", row_groups=2, column_groups=2)
    grid.setup()
    view = grid.party(1, 0)
    torch.testing.assert_close(view.features["train"], grid.data.parties[1][0].splits["train"])
    assert torch.equal(view.targets["train"].argmax(1), grid.data.group_labels[1]) and "test" not in view.targets
    mpdl = OverlapDataModule("breast_cancer", gamma=0.2)
    a, b = mpdl.party("a"), mpdl.party("b")
    assert a.targets is None and b.targets["train"].shape[0] == mpdl.data.b.train.shape[0]
    assert a.features["train"].shape[1] == mpdl.data.a.num_features


def test_configure_optimizers_in_any_single_optimizer_form():
    p = [torch.nn.Parameter(torch.zeros(2))]
    opt = torch.optim.SGD(p, lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1)
    for conf in (opt, [opt], ([opt], [sched]), {"optimizer": opt, "lr_scheduler": {"scheduler": sched}}):
        got = one_optimizer(conf, "x")
        assert got[0] is opt and got[1] in (None, sched)
    for bad in ([opt, opt], {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}, None):
        with pytest.raises(VCLInputError):
            one_optimizer(bad, "x")


USER = {"class_path": "tests.lightning_user.Net", "init_args": {"hidden": 16}}


def own_model(tiny, **overrides):
    return tiny(**{"learner.model": [USER], "learner.epochs": 30, **overrides})


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["fast", "trainer"])
def test_a_user_module_uses_its_own_optimizer_and_resumes_from_its_state_alone(tiny, tmp_path, crash_at, engine):
    """Checkpoints hold the module's tensors; --resume rebuilds it from the config and continues exactly."""
    config = own_model(tiny, **{"run.engine": engine})
    whole = train(config, verbose=False, write=False)
    with pytest.raises(KeyboardInterrupt):
        train(config, verbose=False, callbacks=[RoundCheckpoint(), crash_at(2)])
    resumed = train(config, verbose=False, resume=True)
    assert [r["metrics"] for r in resumed["rounds"]] == [r["metrics"] for r in whole["rounds"]]
    assert [r.get("eta") for r in resumed["rounds"]] == [r.get("eta") for r in whole["rounds"]]
    saved = torch.load(config.run_dir / "parties" / "org1" / "round-3.ckpt", weights_only=True)
    assert any(k.startswith("net.body.") for k in saved["state"]["models"][0][3])  # its tensors, by name


def test_a_user_module_without_configure_optimizers_takes_the_suites_options(tiny):
    config = tiny(**{"learner.model": [{"class_path": "tests.lightning_user.PlainNet"}], "learner.lr": 0.05})
    learner = build_learner(config.learner.model[0], (4,), 3, "l2", 0, LearnerSettings(lr=0.05))
    opt = learner.configure_optimizers()["optimizer"]
    assert isinstance(opt, torch.optim.SGD) and opt.param_groups[0]["lr"] == 0.05
    assert train(config, verbose=False, write=False)["final"]["test"] > 0.8


def test_a_user_modules_own_training_step_is_what_both_engines_step(tmp_path):
    """A user's module with its own training_step is trained by it under the fast engine as under Lightning's
    Trainer (the same parameters, full batches), not by the organization's loss; under the Trainer what it logs
    reaches the fit's TensorBoard. A module that turns automatic optimization off is refused in one sentence."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tests.lightning_user import HuberNet

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(48, 4, generator=g), torch.randn(48, 3, generator=g)
    kw = dict(in_features=4, out_features=3, epochs=4, milestones=(), seed=3, accelerator="cpu", arch="module")
    fits = {}
    for engine in ("fast", "trainer"):
        HuberNet.calls = 0
        learner = ResidualRegressor(engine=engine, module="module:tests.lightning_user.HuberNet", **kw)
        learner.fit_options = {"log_dir": str(tmp_path / engine), "version": "fit"}
        fits[engine] = [p.detach().clone() for p in learner.fit(x, y).parameters()]
        assert HuberNet.calls == 4  # one full batch an epoch
    for a, b in zip(fits["fast"], fits["trainer"], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    l2 = ResidualRegressor(module="module:tests.lightning_user.Net", **kw).fit(x, y)
    assert not torch.allclose(next(l2.parameters()), fits["fast"][0])  # the organization's l2 loss fits otherwise
    board = EventAccumulator(str(tmp_path / "trainer" / "fit")).Reload()
    assert len(board.Scalars("huber")) == 4
    with pytest.raises(VCLInputError, match="ManualNet turns automatic_optimization off"):
        ResidualRegressor(module="module:tests.lightning_user.ManualNet", **kw)


def test_trainer_fits_log_to_each_partys_tensorboard_and_run_the_configs_callbacks(tiny):
    CountEpochs.ended = 0
    config = tiny(
        **{
            "run.engine": "trainer",
            "run.rounds": 2,
            "learner.epochs": 3,
            "learner.callbacks": [{"class_path": "tests.lightning_user.CountEpochs", "init_args": {"step": 2}}],
        }
    )
    train(config, verbose=False)
    assert CountEpochs.ended == 2 * 3 * 2 * 4  # step 2, 3 epochs, 2 rounds, 4 organizations
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for party in ("alice", "org1", "org3"):
        board = EventAccumulator(str(config.run_dir / "parties" / party / "tensorboard" / "round-2")).Reload()
        assert len(board.Scalars("train_loss")) == 3  # one per epoch
    with pytest.raises(VCLInputError, match="not a Lightning callback"):
        train(tiny(**{"learner.callbacks": [{"class_path": "tests.lightning_user.Net"}]}), verbose=False, write=False)


def docs_blocks(language: str) -> list[str]:
    text = (ROOT / "docs" / "usage.md").read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


@pytest.mark.slow
def test_the_docs_example_a_users_module_beats_alone_under_both_engines(tmp_path):
    """docs/usage.md's example as written: its module on PYTHONPATH (outside the project), its YAML, its two
    commands; GAL beats Alone on wine with six organizations both ways."""
    code = next(b for b in docs_blocks("python") if b.startswith("# my_models.py"))
    yaml = next(b for b in docs_blocks("yaml") if b.startswith("# gal_own_model.yaml"))
    (tmp_path / "my_models.py").write_text(code)
    (tmp_path / "gal_own_model.yaml").write_text(yaml)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for engine in ("fast", "trainer"):
        out = tmp_path / engine
        cmd = [sys.executable, str(ROOT / "train.py"), "--config", "gal_own_model.yaml", "--run.engine", engine]
        cmd += ["--out", str(out), "--quiet"]
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        results = json.loads((out / "results.json").read_text())
        gal, alone = results["final"]["test"], results["compare"]["alone"]["final"]["test"]
        assert gal > alone, (engine, gal, alone)


def test_asciis_agents_may_be_a_users_module_and_resume_from_its_state(tiny, crash_at):
    """ASCII's weighted supervised training with the user's LightningModule as every agent's classifier (its
    outputs read as class logits, fitted with the weighted cross-entropy): better than chance, and resumable."""
    config = tiny(method="ascii", **{"learner.model": [USER], "data.organizations": 2, "run.rounds": 3})
    whole = train(config, verbose=False, write=False)
    assert whole["final"]["test"] > 0.8  # wine: three classes
    with pytest.raises(KeyboardInterrupt):
        train(config, verbose=False, callbacks=[RoundCheckpoint(), crash_at(2)])
    resumed = train(config, verbose=False, resume=True)
    assert [r["metrics"] for r in resumed["rounds"]] == [r["metrics"] for r in whole["rounds"]]


def test_a_users_data_module_feeds_gal_and_is_checked_before_work(tiny, tmp_path):
    """data.module names the user's VerticalDataModule: GAL reads its views (Bob's columns decide the label,
    Alice's are noise) and beats Alone; a module that is not one, or whose views disagree with the labels' rows,
    is one sentence."""
    own = {"data.module": {"class_path": "tests.lightning_user.SignalWithBob", "init_args": {"rows": 300}}}
    results = train(tiny(**own, compare=["alone"]), verbose=False)
    assert results["organizations"] == ["alice", "bob"]
    assert results["final"]["test"] > 0.9 > 0.7 > results["compare"]["alone"]["final"]["test"]
    assert tiny(**own, out=None).run_dir.name == "gal_SignalWithBob_M4_seed0"
    for bad, message in (
        ({"class_path": "tests.lightning_user.Net"}, "is not a vertical data module"),
        ({"class_path": "tests.lightning_user.SignalWithBob", "init_args": {"row": 3}}, "fix its init_args"),
        ({"class_path": "tests.lightning_user.Misaligned"}, "view 'bob' has 59 rows of split 'test' for 60 labels"),
    ):
        with pytest.raises(VCLInputError, match=message):
            train(tiny(**{"data.module": bad}), verbose=False, write=False)
    with pytest.raises(VCLInputError, match="leave data.module empty"):
        train(tiny(method="dc_smote", **own), verbose=False, write=False)


def test_a_user_module_that_fails_as_it_is_imported_is_one_sentence(tiny, tmp_path, monkeypatch):
    (tmp_path / "broken_models.py").write_text("raise RuntimeError('no GPU driver here')\n")
    (tmp_path / "typo_models.py").write_text("class Net(\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for path, reason in (("broken_models.Net", "RuntimeError: no GPU driver here"), ("typo_models.Net", "SyntaxError")):
        with pytest.raises(VCLInputError, match=f"importing {path.split('.')[0]} for {path} failed \\({reason}"):
            train(tiny(**{"learner.model": [{"class_path": path}]}), verbose=False, write=False)


def test_image_sequence_and_csv_party_views_train_their_learners_under_a_bare_trainer(signal_csvs):
    """An image patch, a sequence feature group and one organization's CSV file: each party's view is a
    LightningDataModule holding that party's examples only, and a bare Trainer fits the matching learner."""
    from vcl.datamodules import ImageDataModule, SequenceDataModule

    image = ImageDataModule("digits_image", organizations=4, max_train=120)
    sequence = SequenceDataModule("sequence_synthetic", organizations=2, size=60)
    table = TabularDataModule("csv", csv_files=signal_csvs, task="classification")
    for dm, m, name in ((image, 1, "cnn"), (sequence, 1, "lstm"), (table, 1, "linear")):
        dm.setup()
        view = dm.data.views[m]
        party = dm.party(m, targets=torch.zeros(view.splits["train"].shape[0], 2))
        assert isinstance(party, pl.LightningDataModule)
        assert party.features["train"].shape[1:] == view.splits["train"].shape[1:] == view.example_shape
        settings = LearnerSettings(epochs=1, widths=(4,), lstm_hidden=4, batch_size=32)
        learner = build_learner(name, view.example_shape, 2, "l2", 0, settings)
        pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False).fit(
            learner, party
        )
        assert learner.predict(view.splits["test"]).shape == (view.splits["test"].shape[0], 2)
    assert table.party(0).name == "alice" and table.party(1).features["train"].shape[1] == 2  # bob's b1, b2


def test_a_view_of_training_rows_alone_trains_under_a_bare_trainer():
    """A PartyDataModule made from the training rows alone (what a fit hands the Trainer) has no validation,
    test or prediction rows, and Lightning's Trainer fits with it as given."""
    from vcl.datamodules import PartyDataModule

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 4, generator=g), torch.randn(40, 2, generator=g)
    view = PartyDataModule(x, y, batch_size=16, seed=3)
    assert view.val_dataloader() == [] and view.test_dataloader() == [] and view.predict_dataloader() == []
    model = ResidualRegressor(4, 2, epochs=20, milestones=(), seed=0)
    before = local_loss(model.predict(x), y, "l2")
    pl.Trainer(max_epochs=20, logger=False, enable_checkpointing=False, enable_progress_bar=False).fit(model, view)
    assert local_loss(model.predict(x), y, "l2") < before
