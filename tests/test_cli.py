"""train.py: the default run, --help, and every bad input failing early with one clear sentence."""

import json

import pytest

import train as cli
from tests.conftest import write_csv
from vcl.config import RunConfig


@pytest.mark.slow
def test_default_run_writes_valid_results(tmp_path, capsys):
    out = tmp_path / "default"
    assert cli.main(["--out", str(out), "--device", "cpu"]) == 0
    results = json.loads((out / "results.json").read_text())
    cfg = RunConfig()
    assert results["config"]["dataset"] == "wine" and results["config"]["organizations"] == 8
    assert [r["round"] for r in results["rounds"]] == list(range(cfg.rounds + 1))
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
    for name in RunConfig.fields():
        assert f"--{name.replace('_', '-')}" in text


def _fails(args, capsys, message):
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--dataset", "imagenet"], "dataset='imagenet' is unknown"),
        (["--dataset", "iris", "--organizations", "8"], "organizations=8 exceeds the 4 features"),
        (["--method", "vfl"], "method='vfl' is unknown"),
        (["--learner", "forest"], "learner='forest' is unknown"),
        (["--local-loss", "l3"], "local_loss='l3' is not a local loss"),
        (["--task-loss", "mse"], "does not fit a classification task"),
        (["--rounds", "2.5"], "--rounds '2.5' is not a valid int; give a whole number"),
    ],
)
def test_bad_flags(tmp_path, capsys, args, message):
    out = tmp_path / "bad"
    _fails([*args, "--out", str(out)], capsys, message)
    assert not (out / "results.json").exists()


def test_unknown_config_key(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("dataset: wine\nroundz: 3\n")
    _fails(["--config", str(cfg)], capsys, "unknown key(s) roundz")


def test_resume_without_checkpoint_and_with_other_config(tmp_path, capsys):
    out = str(tmp_path / "r")
    _fails(["--out", out, "--resume"], capsys, "no checkpoint")
    assert cli.main(["--out", out, "--rounds", "1", "--epochs", "5", "--compare", "--quiet"]) == 0
    capsys.readouterr()
    _fails(["--out", out, "--rounds", "2", "--epochs", "6", "--resume"], capsys, "other settings (epochs)")


def test_regression_label_that_is_not_a_number(tmp_path, capsys):
    a = write_csv(tmp_path / "a.csv", ["id", "x", "label"], [(i, i, "high" if i % 2 else "low") for i in range(10)])
    b = write_csv(tmp_path / "b.csv", ["id", "z"], [(i, -i) for i in range(10)])
    _fails(
        ["--dataset", "csv", "--csv-files", str(a), str(b), "--task", "regression", "--out", str(tmp_path / "o")],
        capsys,
        "is not a number",
    )


def test_csv_without_task(tmp_path, capsys, signal_csvs):
    _fails(["--dataset", "csv", "--csv-files", *signal_csvs, "--out", str(tmp_path / "o")], capsys, "needs task=")


def test_every_shipped_config_loads_and_checks():
    from pathlib import Path

    from vcl.methods import check_config

    configs = sorted(Path(__file__).resolve().parents[1].glob("configs/*.yaml"))
    assert configs
    for path in configs:
        check_config(RunConfig.from_yaml(path))


def test_a_messy_csv_runs_once_each_party_prepares_its_own_columns(tmp_path, capsys):
    """Text categories and gaps: refused in one sentence by default; with onehot and impute (or drop) the run
    goes through, and the prepared columns are named by category."""
    from tests.test_datamodules import messy_files

    files, _, _ = messy_files(tmp_path, n=60)
    base = ["--dataset", "csv", "--csv-files", *map(str, files), "--task", "classification", "--rounds", "2"]
    base += ["--compare", "alone", "--device", "cpu", "--quiet"]
    _fails([*base, "--out", str(tmp_path / "refused")], capsys, "set missing: drop (or impute) for that file")
    _fails([*base, "--out", str(tmp_path / "x"), "--missing", "guess"], capsys, "missing='guess'; use one of")
    for missing in ("impute", "drop"):
        out = tmp_path / missing
        assert cli.main([*base, "--categorical", "onehot", "--missing", missing, "--out", str(out)]) == 0
        results = json.loads((out / "results.json").read_text())
        assert 0.0 <= results["value"] <= 1.0 and results["organizations"] == ["alice", "bob"]


def test_csv_preparation_is_refused_for_a_dataset_that_needs_none(tmp_path, capsys):
    _fails(["--categorical", "onehot", "--out", str(tmp_path / "o")], capsys, "categorical / missing prepare CSV files")


def test_tensorboard_has_a_run_per_method_with_its_settings_and_bytes_per_message_kind(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "tb"
    assert cli.main(["--out", str(out), "--device", "cpu", "--rounds", "2", "--compare", "alone", "late"]) == 0
    results = json.loads((out / "results.json").read_text())
    for method, res in [("gal", results), *results["compare"].items()]:
        board = EventAccumulator(str(out / "tensorboard" / method))
        board.Reload()
        scalars = board.Tags()["scalars"]
        assert {"accuracy/test", "loss/train", "comm/bytes_sent", "final/value"} <= set(scalars)
        assert board.Scalars("final/value")[-1].value == pytest.approx(res["value"])
        assert "_hparams_/session_start_info" in board.PluginTagToContent("hparams")
        by_kind = [t for t in scalars if t.startswith("comm/bytes_by_kind/")]
        sent = {t: sum(e.value for e in board.Scalars(t)) for t in by_kind}
        assert sum(sent.values()) == pytest.approx(res["bytes_sent"])  # the kinds add up to the run's bytes
    assert (
        "comm/bytes_by_kind/PseudoResidual"
        in EventAccumulator(str(out / "tensorboard" / "gal")).Reload().Tags()["scalars"]
    )
