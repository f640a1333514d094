"""train.py: the default run, --help, and every bad input failing early with one clear sentence."""

import json

import pytest

import train as cli
from tests.conftest import write_csv
from vcl.config import RunConfig


@pytest.mark.slow
def test_default_run_writes_valid_results(tmp_path, capsys):
    out = tmp_path / "default"
    assert cli.main(["--out", str(out), "--run.device", "cpu"]) == 0
    results = json.loads((out / "results.json").read_text())
    cfg = RunConfig()
    assert results["config"]["data"]["dataset"] == "wine" and results["config"]["data"]["organizations"] == 8
    assert [r["round"] for r in results["rounds"]] == list(range(cfg.run.rounds + 1))
    assert len(results["organizations"]) == 8
    assert 0.8 <= results["value"] <= 1.0 and results["value"] > results["compare"]["alone"]["value"]
    assert results["bytes_sent"] > 0 and all(len(r["weights"]) == 8 for r in results["rounds"][1:])
    assert (out / "checkpoints" / "last.ckpt").is_file()
    assert sorted(p.name for p in (out / "tensorboard").iterdir()) == ["alone", "gal"]  # one TensorBoard run each
    printed = capsys.readouterr().out
    assert "alone test accuracy" in printed and "train loss" in printed


def test_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    for name in RunConfig().flat():
        assert f"--{name} " in text or f"--{name}\n" in text, name
    assert "one CSV per organization, Alice's (with the label) first" in " ".join(text.split())  # docstring = help


def test_print_config_round_trips(tmp_path, capsys):
    """--print_config writes a config that, read back, is the same run (and prints itself again unchanged)."""
    args = ["--gal.weights", "bag", "--learner.model", "mlp", "cnn", "--compare", "alone", "late", "--out", "runs/t #2"]
    with pytest.raises(SystemExit) as done:
        cli.main([*args, "--print_config"])
    assert done.value.code == 0
    printed = capsys.readouterr().out
    (tmp_path / "c.yaml").write_text(printed)
    with pytest.raises(SystemExit):
        cli.main(["--config", str(tmp_path / "c.yaml"), "--print_config"])
    assert capsys.readouterr().out == printed
    from vcl.config import parse_args

    assert parse_args(["--config", str(tmp_path / "c.yaml")]) == parse_args(args)
    cfg = parse_args(args)
    assert (cfg.gal.weights, cfg.learner.model, cfg.out) == ("bag", ["mlp", "cnn"], "runs/t #2")
    assert cfg.compare == ["alone", "late"]


def _fails(args, capsys, message):
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--data.dataset", "imagenet"], "data.dataset=imagenet is not valid; it takes one of wine, iris"),
        (["--data.dataset", "iris", "--data.organizations", "8"], "data.organizations=8 exceeds the 4 features"),
        (["--method", "vfl"], "method='vfl' is neither one of vcl's methods (gal, alone,"),
        (["--learner.model", "forest"], "learner.model='forest' is unknown"),
        (["--gal.local_loss", "l3"], "gal.local_loss=l3 is not valid; it takes one of auto, l1, l1.5, l2, l4"),
        (["--gal.task_loss", "mse"], "does not fit a classification task"),
        (["--run.rounds", "2.5"], "run.rounds=2.5 is not valid; it takes a whole number > 0"),
    ],
)
def test_bad_flags(tmp_path, capsys, args, message):
    out = tmp_path / "bad"
    _fails([*args, "--out", str(out)], capsys, message)
    assert not (out / "results.json").exists()


def test_unknown_config_key(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("data: {dataset: wine}\nrun:\n  roundz: 3\n")
    _fails(["--config", str(cfg)], capsys, f"{cfg}: unknown option run.roundz; see `python train.py --help`")
    cfg.write_text("dataset: wine\n")  # a flat key names the group it belongs to
    _fails(["--config", str(cfg)], capsys, f"{cfg}: unknown option dataset; did you mean data.dataset?")


def test_resume_without_checkpoint_and_with_other_config(tmp_path, capsys):
    out = str(tmp_path / "r")
    _fails(["--out", out, "--resume"], capsys, "no checkpoint")
    assert cli.main(["--out", out, "--run.rounds", "1", "--learner.epochs", "5", "--compare", "--quiet"]) == 0
    capsys.readouterr()
    again = ["--out", out, "--run.rounds", "2", "--learner.epochs", "6", "--resume"]
    _fails(again, capsys, "other settings (learner.epochs)")


def test_regression_label_that_is_not_a_number(tmp_path, capsys):
    a = write_csv(tmp_path / "a.csv", ["id", "x", "label"], [(i, i, "high" if i % 2 else "low") for i in range(10)])
    b = write_csv(tmp_path / "b.csv", ["id", "z"], [(i, -i) for i in range(10)])
    _fails(
        [
            "--data.dataset",
            "csv",
            "--data.csv_files",
            str(a),
            str(b),
            "--data.task",
            "regression",
            "--out",
            str(tmp_path / "o"),
        ],
        capsys,
        "is not a number",
    )


def test_csv_without_task(tmp_path, capsys, signal_csvs):
    _fails(
        ["--data.dataset", "csv", "--data.csv_files", *signal_csvs, "--out", str(tmp_path / "o")],
        capsys,
        "needs data.task=",
    )


def test_every_shipped_config_loads_and_checks():
    from pathlib import Path

    from vcl.coordinator.assembly import check_config

    configs = sorted(Path(__file__).resolve().parents[1].glob("configs/*.yaml"))
    assert configs
    for path in configs:
        check_config(RunConfig.from_yaml(path))


@pytest.mark.slow
def test_a_messy_csv_runs_once_each_party_prepares_its_own_columns(tmp_path, capsys):
    """Text categories and gaps: refused in one sentence by default; with onehot and impute (or drop) the run
    goes through, and the prepared columns are named by category."""
    from tests.test_datamodules import messy_files

    files, _, _ = messy_files(tmp_path, n=60)
    base = [
        "--data.dataset",
        "csv",
        "--data.csv_files",
        *map(str, files),
        "--data.task",
        "classification",
        "--run.rounds",
        "2",
    ]
    base += ["--compare", "alone", "--run.device", "cpu", "--quiet"]
    _fails([*base, "--out", str(tmp_path / "refused")], capsys, "set data.missing: drop (or impute) for that file")
    guess = "data.missing=guess is not valid; it takes one of error, drop, impute"
    _fails([*base, "--out", str(tmp_path / "x"), "--data.missing", "guess"], capsys, guess)
    for missing in ("impute", "drop"):
        out = tmp_path / missing
        assert cli.main([*base, "--data.categorical", "onehot", "--data.missing", missing, "--out", str(out)]) == 0
        results = json.loads((out / "results.json").read_text())
        assert 0.0 <= results["value"] <= 1.0 and results["organizations"] == ["alice", "bob"]


def test_csv_preparation_is_refused_for_a_dataset_that_needs_none(tmp_path, capsys):
    _fails(
        ["--data.categorical", "onehot", "--out", str(tmp_path / "o")],
        capsys,
        "data.categorical / data.missing prepare CSV files",
    )


def test_tensorboard_has_a_run_per_method_with_its_settings_and_bytes_per_message_kind(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "tb"
    assert cli.main(["--out", str(out), "--run.device", "cpu", "--run.rounds", "2", "--compare", "alone", "late"]) == 0
    results = json.loads((out / "results.json").read_text())
    for method, res in [("gal", results), *results["compare"].items()]:
        # one file per run: a second one made in the same second may be read first, and the other's start
        # marker then purges what it held (seen on a busy 16-worker machine: final/value had no events)
        assert len(list((out / "tensorboard" / method).glob("events.out.tfevents.*"))) == 1
        board = EventAccumulator(str(out / "tensorboard" / method))
        board.Reload()
        scalars = board.Tags()["scalars"]
        assert {"accuracy/test", "loss/train", "comm/bytes_sent", "final/value"} <= set(scalars)
        assert board.Scalars("final/value")[-1].value == pytest.approx(res["value"])
        seconds = [e.value for e in board.Scalars("time/round_seconds")]
        assert seconds == pytest.approx(res["round_seconds"]) and len(seconds) >= 1  # each round's, as in results
        assert "_hparams_/session_start_info" in board.PluginTagToContent("hparams")
        by_kind = [t for t in scalars if t.startswith("comm/bytes_by_kind/")]
        sent = {t: sum(e.value for e in board.Scalars(t)) for t in by_kind}
        assert sum(sent.values()) == pytest.approx(res["bytes_sent"])  # the kinds add up to the run's bytes
    assert (
        "comm/bytes_by_kind/PseudoResidual"
        in EventAccumulator(str(out / "tensorboard" / "gal")).Reload().Tags()["scalars"]
    )


def test_a_runs_identity_is_what_it_sets_so_a_new_option_at_its_default_changes_no_earlier_run():
    from vcl.config import RunConfig, default_flat, identity_differs

    config = RunConfig.from_dict({"gal.weights": "bag", "run.rounds": 3, "data.dataset": "iris"})
    now = config.identity()
    assert now == {"gal.weights": "bag", "data.dataset": "iris"}  # run.rounds may change on resume
    before = {k: v for k, v in default_flat().items() if not k.startswith(("transport", "out", "run.rounds"))}
    before |= now  # a checkpoint made before identities left defaults out lists every option
    assert identity_differs(before, now) == []
    older = dict(before)
    older.pop("gal.privacy_scope")  # a checkpoint made before an option existed: it held that option's default
    assert identity_differs(older, now) == [] and identity_differs(now, now) == []
    assert identity_differs({"gal.weights": "learned"}, now) == ["data.dataset", "gal.weights"]
    assert identity_differs({**before, "gal.retired": 1}, now) == ["gal.retired"]  # an option since removed


@pytest.mark.slow
def test_the_command_line_ends_without_the_interpreters_teardown_and_loses_no_output(tmp_path):
    """train.py ends with os._exit once main returned (the teardown of torch's and Lightning's modules is over a
    second): its piped output, its exit status, its TensorBoard events and an exit function still come out; an
    exception (here --help's exit) ends as usual."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(cli.__file__).resolve().parent
    hook = tmp_path / "sitecustomize.py"  # an exit function registered as a library would (after train.py's)
    hook.write_text(
        "import atexit, os, sys\n"
        "atexit.register(lambda: sys.stderr.write('exit function ran\\n'))\n"
        "class Torn:\n"
        "    def __del__(self):\n"
        "        os.write(2, b'module torn down')\n"
        "torn = Torn()  # freed when the interpreter tears its modules down\n"
    )
    env = {"PYTHONPATH": f"{tmp_path}", "PATH": "/usr/bin:/bin"}
    out = tmp_path / "run"
    args = ["--out", str(out), "--run.rounds", "1", "--data.organizations", "2", "--learner.epochs", "1"]
    done = subprocess.run([sys.executable, str(root / "train.py"), *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "gal test accuracy" in done.stdout and "exit function ran" in done.stderr
    assert "module torn down" not in done.stderr
    assert json.loads((out / "results.json").read_text())["rounds"][-1]["round"] == 1
    assert all(f.stat().st_size > 0 for f in (out / "tensorboard").rglob("events.out.tfevents.*"))
    bad = subprocess.run([sys.executable, str(root / "train.py"), "--run.rounds", "-1"], capture_output=True,
                         text=True, env=env)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error:")
    help_ = subprocess.run([sys.executable, str(root / "train.py"), "--help"], capture_output=True, text=True, env=env)
    assert help_.returncode == 0 and "--learner.epochs" in help_.stdout and "exit function ran" in help_.stderr
    assert "module torn down" in help_.stderr  # the usual exit
