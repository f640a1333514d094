"""Safe runs: loading a checkpoint never runs code, a run never deletes what it did not write, two runs
cannot share a run directory, and a failed run leaves the directory as it found it."""

import json

import pytest
import torch
from vcl.callbacks import RoundCallback, TensorBoardRounds
from vcl.models.sklearn import dump_estimator, estimator_class, load_estimator

import train as cli
from tests.conftest import write_csv
from vcl.config import RunConfig
from vcl.coordinator.assembly import build_protocol, check_config, datamodule_for
from vcl.coordinator.rundir import LOCK
from vcl.coordinator.runner import train
from vcl.errors import VCLInputError
from vcl.methods.columns import learner_settings
from vcl.storage.checkpoints import load_checkpoint

QUICK = ["--run.rounds", "2", "--learner.epochs", "5", "--data.organizations", "3", "--compare", "--quiet"]


class Touch:
    """Unpickling this creates ``path``: what a crafted checkpoint would do."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def _one_error_line(capsys, text):
    err = capsys.readouterr().err
    assert text in err and err.count("\n") == 1, err
    return err


def _run(out, *extra):
    return cli.main(["--out", str(out), *QUICK, *extra])


# --- checkpoints hold data only --------------------------------------------------------------------------
def test_a_crafted_checkpoint_runs_nothing_and_is_refused(tmp_path, capsys):
    out, marker = tmp_path / "run", tmp_path / "pwned"
    assert _run(out) == 0
    ckpt = out / "checkpoints" / "last.ckpt"
    state = torch.load(ckpt, weights_only=False)  # our own file: trusted here, to build the crafted one
    state["round_seconds"] = Touch(marker)
    torch.save(state, ckpt)
    capsys.readouterr()
    assert _run(out, "--resume") == 2
    _one_error_line(capsys, "holds something other than data")
    assert not marker.exists()


@pytest.mark.parametrize("content", ["empty", "truncated", "foreign", "older", "text"])
def test_damaged_or_foreign_checkpoints_are_refused_with_one_sentence(tmp_path, capsys, content):
    out = tmp_path / "run"
    assert _run(out) == 0
    ckpt = out / "checkpoints" / "last.ckpt"
    data = ckpt.read_bytes()
    if content == "empty":
        ckpt.write_bytes(b"")
    elif content == "truncated":
        ckpt.write_bytes(data[: len(data) // 2])
    elif content == "foreign":
        torch.save({"model": torch.zeros(3)}, ckpt)
    elif content == "older":  # an earlier vcl's checkpoint: the rounds' total seconds, not each round's
        state = torch.load(ckpt, weights_only=False)
        state["seconds"] = sum(state.pop("round_seconds"))
        torch.save(state, ckpt)
    else:
        ckpt.write_text("not a checkpoint")
    capsys.readouterr()
    assert _run(out, "--resume") == 2
    if content in ("empty", "text"):  # not even a zip: refused as a file vcl did not write, before any work
        _one_error_line(capsys, f"{ckpt} is not a torch checkpoint, which vcl did not write")
        return
    line = _one_error_line(capsys, f"checkpoint {ckpt}")
    if content == "older":
        assert "not a run checkpoint of this version of vcl" in line and "--overwrite" in line


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"learner.model": ["gb", "svm", "sklearn:sklearn.linear_model.Ridge"]}, marks=pytest.mark.slow),
        dict(
            method="ascii", **{"data.organizations": 2, "learner.model": ["tree", "logistic"], "learner.max_depth": 2}
        ),
        dict(
            method="dc_smote",
            **{"dc.public_rows": 30, "dc.anchor_rows": 200, "dc.dim": 3, "dc.smote_k": 10, "run.rounds": 1},
        ),
    ],
    ids=["gal-sklearn", "ascii", "dc"],
)
def test_every_checkpoint_loads_as_data_and_restores_the_protocol(tiny, overrides):
    cfg = tiny(**{"data.organizations": 3, "run.rounds": 2, **overrides})
    results = train(cfg, verbose=False)
    state = load_checkpoint(cfg.run_dir / "checkpoints" / "last.ckpt")  # weights_only=True inside
    dm = datamodule_for(cfg)
    dm.setup()
    fresh = build_protocol(cfg, dm.data)
    fresh.load_state_dict(state["protocol"])
    assert fresh.evaluate()["test"] == pytest.approx(results["final"]["test"])


def test_a_stored_estimator_with_a_foreign_type_is_refused():
    from fractions import Fraction

    assert load_estimator(dump_estimator({"w": [1.0, 2.0]})) == {"w": [1.0, 2.0]}
    with pytest.raises(VCLInputError, match="outside scikit-learn"):
        load_estimator(dump_estimator({"w": Fraction(1, 3)}))


def test_only_scikit_learn_estimator_classes_may_be_named(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "evil_module.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass Thing: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec in ("sklearn:evil_module.Thing", "sklearn:os.system"):
        with pytest.raises(VCLInputError, match="only scikit-learn classes"):
            estimator_class(spec, "learner")
    assert not marker.exists()  # refused before import
    with pytest.raises(VCLInputError, match="not a scikit-learn estimator"):
        estimator_class("sklearn:sklearn.utils.Bunch", "learner")
    assert estimator_class("sklearn:sklearn.svm.SVR", "learner").__name__ == "SVR"
    for dc_option in ("dc.reduction", "dc.central", "dc.interpretable"):  # DC's options take scikit-learn only
        evil = {"class_path": "evil_module.Thing", "init_args": {}}
        with pytest.raises(VCLInputError, match="only scikit-learn classes"):
            check_config(RunConfig.from_dict({"method": "dc_smote", dc_option: evil}))
    assert not marker.exists()


def test_a_learner_class_path_outside_scikit_learn_is_the_config_authors_code_and_must_be_a_lightning_module(
    tmp_path, monkeypatch
):
    """learner.model's {class_path} may name the user's own LightningModule: importing it runs its module, code
    the config's author trusts (as with LightningCLI); anything but a LightningModule is refused before work."""
    marker = tmp_path / "imported"
    (tmp_path / "evil_module.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass Thing: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    evil = {"class_path": "evil_module.Thing", "init_args": {}}
    with pytest.raises(VCLInputError, match="evil_module.Thing is not a LightningModule"):
        check_config(RunConfig.from_dict({"learner.model": [evil]}))
    with pytest.raises(VCLInputError, match="cannot import no_such_module.Net"):
        check_config(RunConfig.from_dict({"learner.model": [{"class_path": "no_such_module.Net"}]}))


def test_an_estimator_named_by_class_path_gets_its_init_args_and_prints_back(tmp_path, capsys):
    ridge = {"class_path": "sklearn.linear_model.Ridge", "init_args": {"alpha": 1e6}}
    cfg = RunConfig.from_dict({"learner.model": [ridge, "linear"], "data.organizations": 2})
    from vcl.models import build_learner

    learner = build_learner(cfg.learner.model[0], (13,), 3, "l2", 0, learner_settings(cfg, "gal"))
    assert learner.estimator.alpha == 1e6  # the init args reach the estimator
    assert RunConfig.from_dict(cfg.to_dict()) == cfg  # the one-line form it prints reads back the same
    for bad, message in (
        ({"class_path": "sklearn.linear_model.Ridge", "init_args": {"alpah": 1}}, "does not take these init_args"),
        ({"class_path": "sklearn.linear_model.Ridge", "args": {}}, "as {class_path: <package.module.Class>"),
    ):
        assert cli.main(["--learner.model", json.dumps([bad]), "--out", str(tmp_path / "x")]) == 2
        assert message in capsys.readouterr().err


# --- the run directory -----------------------------------------------------------------------------------
def test_a_directory_with_foreign_files_is_refused_and_overwrite_keeps_them(tmp_path, capsys):
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "tensorboard").mkdir()
    mine = [out / "checkpoints" / "my_model.pt", out / "tensorboard" / "notes.txt"]
    for f in mine:
        f.write_text("keep me")
    assert _run(out) == 2
    _one_error_line(capsys, "already holds files")
    assert _run(out, "--overwrite") == 0
    first = sorted((out / "tensorboard").rglob("events.out.tfevents.*"))
    assert _run(out, "--overwrite") == 0  # replaces its own outputs, again
    assert all(f.read_text() == "keep me" for f in mine)
    assert _run(out, "--overwrite", "--data.val_fraction", "0.99") == 2  # refused input: the last run stays
    assert (out / "results.json").is_file() and (out / "checkpoints" / "last.ckpt").is_file()
    events = sorted((out / "tensorboard").rglob("events.out.tfevents.*"))
    assert len(first) == len(events) > 0 and not set(first) & set(events)  # its own event files, replaced
    assert json.loads((out / "results.json").read_text())["value"] > 0


def test_out_is_taken_literally(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--out", "runs/trial #2", *QUICK]) == 0
    assert (tmp_path / "runs" / "trial #2" / "results.json").is_file()
    assert cli.main(["--out", "runs/a: b", *QUICK]) == 0
    assert (tmp_path / "runs" / "a: b" / "results.json").is_file()


def test_a_second_run_on_a_locked_directory_is_refused(tmp_path, capsys):
    from filelock import FileLock

    out = tmp_path / "run"
    out.mkdir()
    with FileLock(str(out / LOCK)):  # another run holds it
        assert _run(out) == 2
    _one_error_line(capsys, "in use by another run")
    assert not (out / "results.json").exists()


class Boom(RoundCallback):
    def on_round_end(self, run, record):
        raise RuntimeError("a fault in round 0")


@pytest.mark.parametrize("existed", [False, True])
def test_a_failed_run_leaves_the_directory_as_it_found_it(tiny, tmp_path, existed):
    cfg = tiny()
    out = cfg.run_dir
    if existed:
        out.mkdir(parents=True)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(RuntimeError, match="a fault"):
        train(cfg, verbose=False, callbacks=[TensorBoardRounds(), Boom()])  # events written, then it fails
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


# --- one sentence instead of a traceback -----------------------------------------------------------------
def test_flag_values_are_parsed_by_their_declared_type(tmp_path, capsys):
    from vcl.config import parse_args

    def parsed(flag, text):
        group, name = flag.split(".") if "." in flag else (None, flag)
        cfg = parse_args([f"--{flag}", text])
        return getattr(getattr(cfg, group) if group else cfg, name)

    assert parsed("data.label_column", "yes") == "yes" and parsed("data.id_column", "0123") == "0123"
    assert parsed("data.label_column", "null") == "null" and parsed("out", "runs/trial #2") == "runs/trial #2"
    assert parsed("run.concurrent", "false") is False and parsed("run.rounds", "0123") == 123
    assert parsed("learner.milestones", "auto") == ["auto"] and parsed("learner.milestones", "50") == [50]
    assert parsed("data.csv_files", "a #1.csv") == ["a #1.csv"]
    with pytest.raises(VCLInputError, match="learner.epochs=ten is not valid; it takes a whole number >= 0"):
        parsed("learner.epochs", "ten")
    with pytest.raises(VCLInputError, match="run.concurrent=maybe is not valid; it takes true or false"):
        parsed("run.concurrent", "maybe")


@pytest.mark.parametrize(
    "kind,message",
    [
        ("config", "is not valid YAML (line 4: expected"),
        ("flag", "data.assignment={a: [b is not valid; it takes a mapping"),
        ("yes", "data.label_column=True is not valid; it takes text (quote it: YAML reads yes"),
    ],
)
def test_malformed_yaml_is_one_sentence(tmp_path, capsys, kind, message):
    cfg = tmp_path / "c.yaml"
    texts = {"config": "data:\n  dataset: wine\nrun: {rounds: [3\n", "yes": "data: {label_column: yes}\n"}
    cfg.write_text(texts.get(kind, "run: {rounds: 2}\n"))
    extra = ["--data.assignment", "{a: [b"] if kind == "flag" else []
    assert cli.main(["--config", str(cfg), *extra, "--out", str(tmp_path / "o")]) == 2
    _one_error_line(capsys, message)


def test_a_directory_given_as_config(tmp_path, capsys):
    assert cli.main(["--config", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    _one_error_line(capsys, "is a directory, not a file; pass a YAML file")


@pytest.mark.parametrize(
    "content,message",
    [
        ("latin1", "is not UTF-8 text"),
        ("binary", "is not UTF-8 text"),
        ("empty", "is empty"),
        ("header", "has a header but no rows"),
    ],
)
def test_unreadable_csv_files(tmp_path, capsys, signal_csvs, content, message):
    bad = tmp_path / "bob2.csv"
    data = {
        "latin1": "id,b1\nJosé,1.0\n".encode("latin-1"),
        "binary": bytes(range(256)) * 4,
        "empty": b"",
        "header": b"id,b1\n",
    }[content]
    bad.write_bytes(data)
    args = ["--data.dataset", "csv", "--data.csv_files", signal_csvs[0], str(bad), "--data.task", "classification"]
    assert cli.main([*args, "--out", str(tmp_path / "o")]) == 2
    _one_error_line(capsys, f"csv file {bad} {message}")
    assert not (tmp_path / "o").exists()


def test_a_byte_order_mark_does_not_hide_the_id_column(tmp_path, signal_csvs):
    bob = tmp_path / "bob_bom.csv"
    bob.write_bytes(b"\xef\xbb\xbf" + open(signal_csvs[1], "rb").read())
    args = ["--data.dataset", "csv", "--data.csv_files", signal_csvs[0], str(bob), "--data.task", "classification"]
    assert cli.main([*args, "--out", str(tmp_path / "o"), "--run.rounds", "1", "--compare", "--quiet"]) == 0


def test_a_single_class_label_is_refused_before_anything_is_written(tmp_path, capsys):
    a = write_csv(tmp_path / "a.csv", ["id", "x", "label"], [(i, i, 1) for i in range(20)])
    b = write_csv(tmp_path / "b.csv", ["id", "z"], [(i, -i) for i in range(20)])
    out = tmp_path / "o"
    assert (
        cli.main(
            [
                "--data.dataset",
                "csv",
                "--data.csv_files",
                str(a),
                str(b),
                "--data.task",
                "classification",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    _one_error_line(capsys, "holds a single class")
    assert not out.exists()


@pytest.mark.parametrize("where", ["file", "under_file", "not_writable"])
def test_an_out_that_cannot_hold_a_run(tmp_path, capsys, monkeypatch, where):
    f = tmp_path / "a_file"
    f.write_text("x")
    out = {"file": f, "under_file": f / "run", "not_writable": tmp_path / "ro" / "run"}[where]
    if where == "not_writable":  # root ignores permission bits: stand in for a read-only filesystem
        (tmp_path / "ro").mkdir()
        import os

        real = os.access
        monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == str(tmp_path / "ro") else real(p, m))
    assert _run(out) == 2
    _one_error_line(
        capsys, {"file": "is a file", "under_file": "is under the file", "not_writable": "not writable"}[where]
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (["--method", "interm"], "interm averages the organizations' hidden layers"),
        (["--data.val_fraction", "0.99"], "data.val_fraction=0.99 leave no training rows"),
    ],
)
def test_settings_refused_up_front(tmp_path, capsys, args, message):
    out = tmp_path / "o"
    assert cli.main([*args, "--out", str(out)]) == 2
    _one_error_line(capsys, message)
    assert not out.exists()


def test_resume_with_fewer_rounds_than_already_run_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["--out", str(out), "--run.rounds", "3", "--learner.epochs", "5", "--compare", "--quiet"]) == 0
    capsys.readouterr()
    assert (
        cli.main(["--out", str(out), "--run.rounds", "2", "--learner.epochs", "5", "--compare", "--quiet", "--resume"])
        == 2
    )
    _one_error_line(capsys, "run.rounds=2 is below the 3 rounds already run")
    assert len(json.loads((out / "results.json").read_text())["rounds"]) == 4


def test_an_unknown_flag_prints_one_line_and_a_hint(capsys):
    assert cli.main(["--roundz", "3"]) == 2
    _one_error_line(capsys, "unknown option roundz; see `python train.py --help`")
    assert cli.main(["--rounds", "3"]) == 2
    _one_error_line(capsys, "unknown option rounds; did you mean run.rounds?")


@pytest.mark.slow
def test_ctrl_c_says_where_to_resume_and_resume_finishes_the_run(tmp_path, capsys, monkeypatch, crash_at):
    import vcl.coordinator.runner

    full, cut = tmp_path / "full", tmp_path / "cut"
    args = ["--run.rounds", "4", "--learner.epochs", "5", "--compare", "--quiet"]
    assert cli.main(["--out", str(full), *args]) == 0
    real = vcl.coordinator.runner.default_callbacks
    monkeypatch.setattr(vcl.coordinator.runner, "default_callbacks", lambda c, v, f=None: [*real(c, v, f), crash_at(2)])
    capsys.readouterr()
    assert cli.main(["--out", str(cut), *args]) == 130
    _one_error_line(capsys, f"interrupted after round 2 (checkpoint in {cut}); resume with: python train.py --out")
    monkeypatch.setattr(vcl.coordinator.runner, "default_callbacks", real)
    assert cli.main(["--out", str(cut), *args, "--resume"]) == 0
    a, b = (json.loads((d / "results.json").read_text())["rounds"] for d in (full, cut))
    assert [r["metrics"] for r in a] == [r["metrics"] for r in b]


@pytest.mark.slow
def test_sigterm_stops_at_a_saved_round_with_one_line(tmp_path):
    from tests.helpers import sigterm_after_first_checkpoint

    code, err, records = sigterm_after_first_checkpoint(
        ["--run.rounds", "400", "--compare", "--quiet"], tmp_path / "run"
    )
    assert code == 143, err
    assert err.count("\n") == 1 and "terminated after round" in err and "--resume" in err
    saved = int(err.split("after round ")[1].split(" ")[0])
    assert records == saved + 1


def test_interm_with_hidden_layers_is_accepted(tiny):
    assert check_config(tiny(method="interm", **{"learner.model": ["mlp"]})).name == "GAL"  # checked: its family


def test_an_organization_name_cannot_point_a_checkpoint_outside_the_run(tiny, tmp_path):
    """Each party checkpoints under parties/<name>/: a name like ../x is refused before any work."""
    from vcl.coordinator.runner import train
    from vcl.errors import VCLInputError

    bad = {"alice": ["alcohol", "malic_acid"], "../../outside": ["ash", "alcalinity_of_ash"]}
    with pytest.raises(VCLInputError, match=r"^assignment names organization '\.\./\.\./outside'; use letters"):
        train(tiny(**{"data.assignment": bad}), verbose=False)
    assert not (tmp_path / "outside").exists() and not (tmp_path / "run").exists()


def test_party_checkpoints_are_private_name_whole_rounds_and_are_pruned_only_behind_a_kept_one(tmp_path):
    import stat

    from vcl.family import Party as Base
    from vcl.storage.checkpoints import party_file, prune_party, save_party

    class Party(Base):
        def state_dict(self):
            return {"w": torch.ones(2)}

    for round_ in (1, 2, 3):
        save_party(Party(), "org1", tmp_path, round_, "run")
    files = sorted(p.name for p in (tmp_path / "org1").iterdir())
    assert files == ["round-1.ckpt", "round-2.ckpt", "round-3.ckpt"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in (tmp_path / "org1").iterdir())
    prune_party("org1", tmp_path, 10**9)  # a round it does not hold: nothing goes
    assert sorted(p.name for p in (tmp_path / "org1").iterdir()) == files
    prune_party("org1", tmp_path, 3)
    assert sorted(p.name for p in (tmp_path / "org1").iterdir()) == ["round-3.ckpt"]
    for bad in (-1, 10**9 + 1, "2", 2.0, True):
        with pytest.raises(VCLInputError, match="a checkpoint's round is a whole number from 0 to 10\\^9"):
            party_file(tmp_path, "org1", bad)


def test_a_party_on_its_own_root_keeps_each_run_apart_and_acts_only_on_the_run_it_serves(tmp_path):
    """A party on its own machine kept every run's checkpoints in one folder (``<root>/<name>/round-<t>.ckpt``): a
    second run overwrote the first's rounds, and the first could no longer predict; and it wrote a Save for any
    run a request named. Now each run's files sit in ``<root>/<name>/<run id>/``, a party built for a run acts on
    that run only (the first Save or Load binds it), a prune touches only its run, and a run kept the old way still
    loads."""
    from vcl.family import Party
    from vcl.messages import Load, Prune, Save
    from vcl.party.runtime import PartyRuntime
    from vcl.storage.checkpoints import save_party

    class Weights(Party):
        def __init__(self, value):
            self.w = torch.full((2,), float(value))

        def state_dict(self):
            return {"w": self.w}

        def load_state_dict(self, state):
            self.w = state["w"]

        def log_round(self, folder, round_):
            pass

    def runtime(value):
        return PartyRuntime(Weights(value), name="org1", root=tmp_path)

    first, second = runtime(1), runtime(2)
    for round_ in (1, 2):
        first.handle(Save("alice", "org1", round_, run="aaaa/digest"))
        second.handle(Save("alice", "org1", round_, run="bbbb/digest"))
    assert sorted(p.name for p in (tmp_path / "org1" / "aaaa").iterdir()) == ["round-1.ckpt", "round-2.ckpt"]
    with pytest.raises(PermissionError, match="org1 serves run aaaa, so it refuses a Save for run bbbb"):
        first.handle(Save("alice", "org1", 3, run="bbbb/digest"))
    with pytest.raises(PermissionError, match="refuses a Load for run bbbb"):
        first.handle(Load("alice", "org1", 1, run="bbbb/digest"))
    with pytest.raises(TypeError, match="names no run a folder can hold"):
        runtime(0).handle(Save("alice", "org1", 1, run="../up/digest"))
    second.handle(Prune("alice", "org1", 2))
    assert not (tmp_path / "org1" / "bbbb" / "round-1.ckpt").exists()
    assert (tmp_path / "org1" / "aaaa" / "round-1.ckpt").exists()  # another run's files stay
    again = runtime(0)  # the first run, predicting after the second ran
    again.handle(Load("alice", "org1", 2, run="aaaa/digest"))
    assert again.party.w.tolist() == [1.0, 1.0]
    save_party(Weights(7), "org1", tmp_path, 4, "old/digest")  # a run kept before runs had folders of their own
    runtime(3).handle(Prune("alice", "org1", 5))  # serving no run yet: it prunes nothing of its root
    old = runtime(0)
    old.handle(Load("alice", "org1", 4, run="old/digest"))
    assert old.party.w.tolist() == [7.0, 7.0]
    with pytest.raises(VCLInputError, match="holds party org1's round 4 of another run"):
        runtime(0).handle(Load("alice", "org1", 4, run="other/digest"))
