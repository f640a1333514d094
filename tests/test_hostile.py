"""What a hostile or careless user tries: a failed --overwrite, links in the run directory, out-of-range seeds,
estimator values scikit-learn refuses, YAML that expands without bound, files that are not what they claim, a
party checkpoint from another run, a run directory removed mid-run, and a diverging loss. Each ends in one
sentence (exit 2 where the input is known before work) and loses nothing."""

import hashlib
import json
import os
import re
import shutil

import numpy as np
import pytest
from vcl.callbacks import RoundCallback
from vcl.datamodules.prepare import prepare_group

import train as cli
from tests.conftest import write_csv
from vcl.coordinator.rundir import PREVIOUS
from vcl.errors import VCLInputError

QUICK = ["--run.rounds", "3", "--learner.epochs", "5", "--data.organizations", "3", "--compare", "--quiet"]


def _run(out, *extra):
    return cli.main(["--out", str(out), *QUICK, *extra])


def _one_line(capsys, *texts):
    err = capsys.readouterr().err
    assert all(t in err for t in texts) and err.count("\n") == 1, err
    return err


def _digests(root):
    """Every file under ``root`` (not the lock) and its bytes' digest."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".vcl.lock"
    }


@pytest.fixture
def finished(tmp_path):
    out = tmp_path / "run"
    assert _run(out) == 0
    return out, _digests(out)


@pytest.fixture
def add_callback(monkeypatch):
    """Run the CLI with one more round callback after the default ones."""
    import vcl.coordinator.runner

    real = vcl.coordinator.runner.default_callbacks

    def add(callback=None):  # None: the default callbacks alone again
        extra = [] if callback is None else [callback]
        monkeypatch.setattr(vcl.coordinator.runner, "default_callbacks", lambda c, v, f=None: [*real(c, v, f), *extra])

    return add


class FailAt(RoundCallback):
    def __init__(self, at, error):
        self.at, self.error = at, error

    def on_round_end(self, run, record):
        if record["round"] == self.at:
            raise self.error


# --- a failed --overwrite loses nothing --------------------------------------------------------------------
def test_an_estimator_value_scikit_learn_refuses_is_refused_before_the_old_run_is_touched(finished, capsys):
    out, before = finished
    ridge = {"class_path": "sklearn.linear_model.Ridge", "init_args": {"alpha": -5}}
    assert _run(out, "--learner.model", json.dumps(ridge), "--overwrite") == 2
    _one_line(capsys, "learner.model: sklearn.linear_model.Ridge refuses its init_args", "'alpha' parameter")
    assert _digests(out) == before


@pytest.mark.parametrize("at", [0, 2])
def test_an_overwrite_that_fails_mid_run_puts_the_old_run_back_byte_for_byte(finished, add_callback, at):
    out, before = finished
    add_callback(FailAt(at, RuntimeError("a fault in the new run")))
    with pytest.raises(RuntimeError, match="a fault in the new run"):
        _run(out, "--overwrite", "--run.seed", "1")
    assert _digests(out) == before and not (out / PREVIOUS).exists()


def test_an_interrupted_overwrite_resumes_and_its_completion_retires_the_old_run(finished, add_callback, capsys):
    out, before = finished
    add_callback(FailAt(2, KeyboardInterrupt()))
    assert _run(out, "--overwrite", "--run.seed", "1") == 130
    _one_line(capsys, "interrupted after round 2", f"stay in {out / PREVIOUS} until it completes", "--resume")
    assert _digests(out / PREVIOUS) == before  # set aside whole, until the new run completes
    add_callback()
    assert _run(out, "--run.seed", "1", "--resume") == 0
    assert not (out / PREVIOUS).exists()
    whole = out.parent / "whole"
    assert _run(whole, "--run.seed", "1") == 0
    a, b = (json.loads((d / "results.json").read_text()) for d in (out, whole))
    assert a["rounds"][-1]["metrics"] == b["rounds"][-1]["metrics"] and a["value"] == b["value"]


def test_a_second_overwrite_of_an_unfinished_replacement_still_restores_the_completed_run(finished, add_callback):
    out, before = finished
    add_callback(FailAt(2, KeyboardInterrupt()))
    assert _run(out, "--overwrite", "--run.seed", "1") == 130
    add_callback(FailAt(1, RuntimeError("again")))
    with pytest.raises(RuntimeError, match="again"):
        _run(out, "--overwrite", "--run.seed", "2")
    assert _digests(out) == before and not (out / PREVIOUS).exists()


# --- never through a link ----------------------------------------------------------------------------------
@pytest.mark.parametrize("link", ["checkpoints", "checkpoints/last.ckpt", "results.json", "parties/org1", ".vcl.lock"])
@pytest.mark.parametrize("switch", ["--overwrite", "--resume"])
def test_a_link_where_the_suite_writes_is_refused_and_its_target_untouched(finished, capsys, link, switch):
    out, _ = finished
    elsewhere = out.parent / "elsewhere"
    shutil.copytree(out, elsewhere)
    target = elsewhere / link
    before = _digests(elsewhere)
    path = out / link
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    path.symlink_to(target, target_is_directory=target.is_dir())
    assert _run(out, switch) == 2
    _one_line(capsys, f"{path} is a symbolic link", "never writes, replaces or removes")
    assert _digests(elsewhere) == before and path.is_symlink()


# --- one sentence before any work --------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--run.seed", "--data.split_seed"])
@pytest.mark.parametrize("value", ["-1", str(2**32)])
def test_a_seed_out_of_range(tmp_path, capsys, flag, value):
    assert _run(tmp_path / "run", flag, value) == 2
    _one_line(capsys, f"{flag[2:]}={value} is out of range", "from 0 to 4294967295")
    assert not (tmp_path / "run").exists()


def _alias_bomb(depth=9):
    text = "[&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"
    for i in range(1, depth):
        text += f", &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]"
    return text + "]"


@pytest.mark.parametrize("kind", ["expanding", "recursive"])
def test_a_config_whose_aliases_expand_without_bound_is_refused_unexpanded(tmp_path, capsys, kind):
    config = tmp_path / "bomb.yaml"
    value = _alias_bomb() if kind == "expanding" else "&x [1, *x]"
    config.write_text(f"learner:\n  hidden: {value}\n")
    assert cli.main(["--config", str(config), "--out", str(tmp_path / "run")]) == 2
    _one_line(capsys, f"config file {config} expands to more than 100000 values or refers to itself")
    assert cli.main(["--learner.hidden", _alias_bomb(), "--out", str(tmp_path / "run")]) == 2  # a flag's YAML too
    _one_line(capsys, "learner.hidden is not valid")
    assert not (tmp_path / "run").exists()


def test_a_flag_or_config_with_a_few_aliases_still_reads(tmp_path):
    from vcl.config import parse_args

    config = tmp_path / "aliases.yaml"
    config.write_text("learner:\n  hidden: &w [8, 8]\n  cnn_widths: *w\n")
    cfg = parse_args(["--config", str(config)])
    assert cfg.learner.hidden == [8, 8] == cfg.learner.cnn_widths


@pytest.mark.parametrize("kind", ["directory", "fifo", "device"])
def test_a_config_or_csv_that_is_not_a_regular_file_is_named_for_what_it_is(tmp_path, capsys, signal_csvs, kind):
    path = {"directory": tmp_path / "dir.yaml", "fifo": tmp_path / "pipe", "device": "/dev/zero"}[kind]
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # reading it would block: it must not be opened
    what = {"directory": "a directory", "fifo": "a FIFO", "device": "a device"}[kind]
    assert cli.main(["--config", str(path), "--out", str(tmp_path / "run")]) == 2
    _one_line(capsys, f"config file {path} is {what}, not a file")
    csv = ["--data.dataset", "csv", "--data.task", "classification", "--data.organizations", "2"]
    assert _run(tmp_path / "run", *csv, "--data.csv_files", signal_csvs[0], str(path)) == 2
    _one_line(capsys, f"csv file {path} is {what}, not a file")


@pytest.fixture
def csvs(tmp_path):
    """Alice's file (40 rows) and a writer for bob's, given his rows' extra cells."""
    rng = np.random.RandomState(0)
    alice = tmp_path / "alice.csv"
    write_csv(alice, ["id", "a1", "label"], [(i, rng.rand(), i % 2) for i in range(40)])

    def bob(header, cell, rows=range(40)):
        path = tmp_path / "bob.csv"
        write_csv(path, ["id", "b1", *header], [(i, rng.rand(), *cell(i)) for i in rows])
        return ["--data.dataset", "csv", "--data.task", "classification", "--data.organizations", "2",
                "--data.csv_files", str(alice), str(path)]  # fmt: skip

    return bob


@pytest.mark.parametrize("missing", ["impute", "drop", "error"])
def test_an_empty_column_is_named_whatever_the_missing_policy(tmp_path, capsys, csvs, missing):
    assert _run(tmp_path / "run", *csvs(["empty"], lambda i: ("",)), "--data.missing", missing) == 2
    _one_line(capsys, "bob.csv, column 'empty' has no value in any row; remove the column or fill it in")


def test_a_column_empty_on_the_training_rows_cannot_be_imputed():
    block = np.array([[np.nan, 1.0], [np.nan, 2.0], [5.0, 3.0]], dtype=object)
    with pytest.raises(VCLInputError, match="column 'x' has no value in its organization's training rows"):
        prepare_group(block, ["numeric", "numeric"], ["x", "y"], "impute", np.array([0, 1]))
    names, fitted = prepare_group(block, ["numeric", "numeric"], ["x", "y"], "impute", np.array([1, 2]))
    assert names == ["x", "y"] and fitted.encode(block)[0, 0] == 5.0  # imputed from the training rows' mean
    x, t, y = [np.nan, np.nan, 5.0], [None, None, "a"], [np.nan, 2.0, 3.0]  # x and t hold nothing in rows 0 and 1
    for columns, names in (((x, t, y), ["x", "t", "y"]), ((t, x, y), ["t", "x", "y"])):
        kinds = ["categorical" if n == "t" else "numeric" for n in names]
        with pytest.raises(VCLInputError, match=f"^column '{names[0]}' has no value"):  # the first, in column order
            prepare_group(np.array(columns, dtype=object).T, kinds, names, "impute", np.array([0, 1]))


@pytest.mark.parametrize("missing", ["error", "impute", "drop"])
@pytest.mark.parametrize("cell", ["inf", "-Infinity"])
def test_an_infinite_cell_is_called_infinite(tmp_path, capsys, csvs, missing, cell):
    args = csvs(["b2"], lambda i: (cell if i == 5 else 0.5,))
    assert _run(tmp_path / "run", *args, "--data.missing", missing) == 2
    _one_line(capsys, f"column 'b2', ID '5': '{cell}' is infinite; give a finite number")


def test_too_few_shared_rows_are_counted_not_called_a_single_class(tmp_path, capsys, csvs):
    assert _run(tmp_path / "run", *csvs([], lambda i: (), rows=[7, 100])) == 2
    _one_line(capsys, "share only 1 value(s) of 'id' ('7'); a run needs at least 3 shared rows")
    assert _run(tmp_path / "run", *csvs(["b2"], lambda i: ("" if i > 1 else 1.0,)), "--data.missing", "drop") == 2
    _one_line(capsys, "share only 2 value(s) of 'id' ('0', '1') once rows with a missing value are dropped")


@pytest.mark.parametrize("content", ["object", "npy", "junk", "text"])
def test_an_npz_that_is_not_plain_numeric_arrays(tmp_path, capsys, content):
    path = tmp_path / "data.npz"
    if content == "object":
        np.savez(path, X=np.array([[[1, "a"]]], dtype=object), y=np.array([1]))
    elif content == "npy":
        with open(path, "wb") as f:
            np.save(f, np.zeros((2, 3, 4)))
    elif content == "junk":
        path.write_bytes(b"PK\x03\x04 not a zip")
    else:
        np.savez(path, X=np.array([[["a"]]]), y=np.array([1]))
    assert _run(tmp_path / "run", "--data.dataset", "npz", "--data.root", str(path)) == 2
    err = _one_line(capsys, str(path), "with numpy.savez")
    assert {"object": "Object arrays", "npy": "one array", "junk": "not a zip", "text": "not numbers"}[content] in err


# --- during the run ----------------------------------------------------------------------------------------
class RemoveOut(RoundCallback):
    def on_round_end(self, run, record):
        if record["round"] == 1:
            shutil.rmtree(run.out_dir)


def test_a_run_directory_removed_mid_run_ends_in_one_sentence(tmp_path, capsys, add_callback):
    add_callback(RemoveOut())
    out = tmp_path / "run"
    assert _run(out) == 1
    _one_line(capsys, "No such file or directory", f"make sure --out {out} stays in place")
    assert not out.exists()


@pytest.mark.parametrize("other", ["settings", "run"])
def test_a_party_checkpoint_from_another_run_is_refused_on_resume(tmp_path, capsys, add_callback, other):
    add_callback(FailAt(2, KeyboardInterrupt()))
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    assert _run(mine) == 130
    assert _run(theirs, *(["--run.seed", "1"] if other == "settings" else [])) == 130
    shutil.copy(theirs / "parties" / "org1" / "round-2.ckpt", mine / "parties" / "org1" / "round-2.ckpt")
    capsys.readouterr()
    assert _run(mine, "--resume") == 2
    whose = "a run with other settings" if other == "settings" else "another run"
    _one_line(capsys, f"holds party org1's round 2 of {whose}, not of the run in this --out")


def test_a_diverging_run_writes_strict_json(tmp_path):
    out = tmp_path / "run"
    args = ["--learner.lr", "1e10", "--learner.grad_clip", "0", "--learner.weight_decay", "0"]
    assert _run(out, *args) == 0

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    results = json.loads((out / "results.json").read_text(), parse_constant=refuse)
    losses = [r["train_loss"] for r in results["rounds"]]
    assert None in losses  # NaN written as null


def test_strict_json_writes_every_non_finite_number_as_null():
    from vcl.coordinator.rundir import strict_json

    text = strict_json({"a": float("nan"), "b": [1.5, float("inf"), (float("-inf"), 2)], "c": "NaN"})
    assert json.loads(text) == {"a": None, "b": [1.5, None, [None, 2]], "c": "NaN"}


# --- found by the second probe -----------------------------------------------------------------------------
def test_resume_after_the_data_changed_is_refused(tmp_path, capsys, csvs, add_callback):
    add_callback(FailAt(2, KeyboardInterrupt()))
    out = tmp_path / "run"
    assert _run(out, *csvs(["b2"], lambda i: (0.5,))) == 130
    add_callback()
    capsys.readouterr()
    assert _run(out, *csvs(["b2"], lambda i: (0.5,), rows=range(39)), "--resume") == 2  # bob dropped a row
    _one_line(capsys, "--resume: the data differ from those the checkpoint", "resume with the original data")


@pytest.mark.parametrize(
    "args,message",
    [
        (["--learner.lr", "1e300"], "learner.lr=1e+300 is not a finite number within float32's range"),
        (["--gal.noise_sigma", "1e39"], "gal.noise_sigma=1e+39 is not a finite number within float32's range"),
        (["--method", "interm", "--learner.model", "mlp", "--learner.hidden", "[]"], "use mlp with learner.hidden"),
        (["--data.organizations", "3", "--out", "x" * 300], "File name too long"),
    ],
    ids=["lr", "sigma", "interm-no-hidden", "long-name"],
)
def test_values_no_run_can_use_are_refused_up_front(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    assert _run(tmp_path / "run", *args) == 2
    _one_line(capsys, message)
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_runs_out_of_memory_says_so_and_takes_back_what_it_wrote(tmp_path, capsys, add_callback):
    error = RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory")
    add_callback(FailAt(1, error))  # after round 0's checkpoint
    out = tmp_path / "run"
    assert _run(out) == 1
    _one_line(capsys, "error: the run ran out of memory; make the models or batches smaller")
    assert not out.exists()  # so that running again with smaller settings needs no --overwrite


def test_a_checkpoint_write_that_fails_leaves_no_partial_file(tmp_path, monkeypatch):
    import torch

    from vcl.storage.checkpoints import atomic_torch_save

    path = tmp_path / "last.ckpt"
    atomic_torch_save({"a": 1}, path)
    before = path.read_bytes()

    def full_disk(obj, target):  # the open temporary file it is given (a path, in earlier versions)
        (target if hasattr(target, "write") else open(target, "wb")).write(b"half")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match="unexpected pos") as raised:
        atomic_torch_save({"a": 2}, path)
    assert raised.value.filename == str(path) and path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]


def test_a_signal_during_a_checkpoints_rename_waits_until_the_saved_round_is_named(tmp_path, monkeypatch):
    """Ctrl-C arriving as the rename lands used to stop the run before it named the round saved: it then said
    "after round 0" over a checkpoint of round 1. The rename and the naming now happen together, then the signal."""
    import signal

    from vcl.storage.checkpoints import atomic_torch_save

    real, named = os.replace, []

    def replace_then_signal(src, dst):
        real(src, dst)
        signal.raise_signal(signal.SIGINT)  # Python runs the handler at its next step: here, before then()

    monkeypatch.setattr(os, "replace", replace_then_signal)
    # Python's own handler, unblocked, whatever an earlier test or library left (once, in a whole suite's run, no
    # KeyboardInterrupt came here; alone and after every earlier file it did)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        with pytest.raises(KeyboardInterrupt):
            atomic_torch_save({"round": 1}, tmp_path / "last.ckpt", then=lambda: named.append(1))
        assert named == [1] and (tmp_path / "last.ckpt").exists()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler before it is back
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def test_a_read_only_folder_of_the_run_is_refused_before_work(finished, capsys, monkeypatch):
    out, before = finished
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: real(p, mode) and "checkpoints" not in str(p))
    assert _run(out, "--resume", "--run.rounds", "4") == 2
    _one_line(capsys, f"{out / 'checkpoints'} is not writable", "the run writes there")
    assert _digests(out) == before


def test_an_interrupt_while_starting_is_one_line(monkeypatch, capsys):
    import vcl.config

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(vcl.config, "parse_args", interrupted)
    assert cli.main([]) == 130
    _one_line(capsys, "interrupted before the run started.")


@pytest.mark.parametrize(
    "text,message",
    [
        ("run:\n  rounds: 2\n  rounds: 3\n", "gives 'rounds' twice (line 3); keep one"),
        ("# only a comment\n", "holds no options; write some (see configs/) or leave --config out"),
        ("data:\n  label_column: caf\xe9\n".encode("latin-1"), "is not UTF-8 text; save it as UTF-8"),
    ],
    ids=["repeated-key", "empty", "latin-1"],
)
def test_a_config_file_that_says_too_much_or_nothing(tmp_path, capsys, text, message):
    config = tmp_path / "c.yaml"
    config.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert cli.main(["--config", str(config), "--out", str(tmp_path / "run")]) == 2
    _one_line(capsys, f"config file {config}", message)


def test_csv_columns_the_run_cannot_tell_apart_or_hold(tmp_path, capsys, csvs):
    assert _run(tmp_path / "run", *csvs(["b1"], lambda i: (0.5,))) == 2  # bob's header: id, b1, b1
    _one_line(capsys, "bob.csv names the column 'b1' twice; give each column its own name")
    assert _run(tmp_path / "run", *csvs(["b2"], lambda i: (0.5,)), "--data.label_column", "id") == 2
    _one_line(capsys, "data.label_column and data.id_column both name 'id'")
    assert _run(tmp_path / "run", *csvs(["b2"], lambda i: ("1e308" if i == 3 else 0.5,)), "--data.missing", "drop") == 2
    _one_line(capsys, "column 'b2', ID '3': '1e308' is beyond float32's range (3.4e38)")
    assert not (tmp_path / "run").exists()


def test_numbers_too_close_to_zero_for_float32_are_refused(tmp_path, capsys):
    assert _run(tmp_path / "run", "--gal.privacy_alpha", "1e-320") == 2
    _one_line(capsys, "gal.privacy_alpha=1e-320 is too close to 0 for float32")


def test_a_text_file_given_as_npz_is_called_what_it_is(tmp_path, capsys):
    path = tmp_path / "t.npz"
    path.write_text("hello you")
    assert _run(tmp_path / "run", "--data.dataset", "npz", "--data.root", str(path)) == 2
    _one_line(capsys, f"{path} is not an .npz file (numpy's zip of arrays)")


@pytest.mark.parametrize(
    "address,message", [("not a host:::", "is not host:port or auto"), ("127.0.0.1:1", "nothing answers")]
)
def test_a_ray_address_where_nothing_answers_is_one_sentence_not_minutes_of_retries(address, message):
    from vcl.transports.ray import answering

    with pytest.raises(VCLInputError, match=f"transport.address='{re.escape(address)}'.*{message}.*ray start --head"):
        answering(address, "start one with `ray start --head`", seconds=1.0)


def test_the_resume_command_names_the_interpreter_and_script_that_ran(tmp_path, capsys, add_callback):
    add_callback(FailAt(1, KeyboardInterrupt()))
    out = tmp_path / "run"
    assert cli.main(["--out", str(out), *QUICK], prog=["/opt/py/bin/python3", "/src/vcl/train.py"]) == 130
    _one_line(capsys, "resume with: /opt/py/bin/python3 /src/vcl/train.py --out")


@pytest.mark.parametrize("place", ["parties/dave/round-1.ckpt", "results.json", "checkpoints/last.ckpt"])
@pytest.mark.parametrize("switch", ["--overwrite", "--resume"])
def test_a_file_or_folder_vcl_did_not_write_at_one_of_its_paths_is_left_alone(finished, capsys, place, switch):
    out, _ = finished
    path = out / place
    if path.exists():
        path.unlink()
    if place.startswith("parties"):
        path.parent.mkdir(parents=True)
        path.write_text("mine")
    else:
        path.mkdir()
    before = _digests(out)
    assert _run(out, switch) == 2
    what = "not a torch checkpoint" if place.startswith("parties") else "a directory"
    _one_line(capsys, f"{path} is {what}, which vcl did not write", "move it away")
    assert _digests(out) == before


@pytest.mark.parametrize(
    "method,args,message",
    [
        ("dc_smote", ["--dc.collab_dim", "100000"], "dc.collab_dim=100000; use 1.."),
        ("mpdl", ["--mpdl.folds", "100000"], "too few for mpdl.folds=100000 (2 rows per fold); lower mpdl.folds"),
    ],
)
def test_an_input_refused_only_once_the_rounds_meet_the_data_leaves_nothing_behind(
    tmp_path, capsys, method, args, message
):
    out = tmp_path / "run"
    assert cli.main(["--out", str(out), "--method", method, "--run.rounds", "1", "--quiet", *args]) == 2
    _one_line(capsys, message)
    assert not out.exists()


def test_an_interrupt_after_the_results_are_written_says_the_run_is_whole(tmp_path, capsys, monkeypatch):
    import vcl.coordinator.runner

    def interrupted(results):
        raise KeyboardInterrupt

    monkeypatch.setattr(vcl.coordinator.runner, "summary", interrupted)
    out = tmp_path / "run"
    assert _run(out) == 130
    _one_line(capsys, f"interrupted after the run completed (results in {out / 'results.json'})")
    assert json.loads((out / "results.json").read_text())["value"] > 0


def test_a_csv_column_without_a_name_is_refused(tmp_path, capsys, csvs):
    assert _run(tmp_path / "run", *csvs([" "], lambda i: (0.5,))) == 2
    _one_line(capsys, "bob.csv has a column with no name in its header; name every column")


# --- found by the third probe ------------------------------------------------------------------------------
PARTY_DIRS = ["--data.organizations", "3", "--transport.party_dirs"]


def test_a_party_dir_holding_another_runs_checkpoints_needs_resume_or_overwrite(tmp_path, capsys):
    parties = tmp_path / "elsewhere"
    assert _run(tmp_path / "first", *PARTY_DIRS, "", "", str(parties)) == 0
    before = _digests(parties)
    assert before and all(name.startswith("org2/") for name in before)
    assert _run(tmp_path / "second", *PARTY_DIRS, "", "", str(parties)) == 2
    _one_line(capsys, f"transport.party_dirs {parties} already holds parties' checkpoints (org2/round-3.ckpt")
    assert _digests(parties) == before


@pytest.mark.parametrize("switch", [[], ["--overwrite"], ["--resume"]])
def test_a_party_dir_with_a_file_vcl_did_not_write_is_left_alone(tmp_path, capsys, switch):
    parties = tmp_path / "elsewhere"
    (parties / "org2").mkdir(parents=True)
    (parties / "org2" / "round-0.ckpt").write_text("mine")
    assert _run(tmp_path / "run", *PARTY_DIRS, str(parties), *switch) == 2
    _one_line(capsys, f"{parties / 'org2' / 'round-0.ckpt'} is not a torch checkpoint, which vcl did not write")
    assert (parties / "org2" / "round-0.ckpt").read_text() == "mine"


def test_a_party_dir_that_is_a_file_is_named_as_the_option(tmp_path, capsys):
    parties = tmp_path / "elsewhere"
    parties.write_text("a file")
    assert _run(tmp_path / "run", *PARTY_DIRS, str(parties)) == 2
    _one_line(capsys, f"transport.party_dirs {parties} is a file; give a directory path")
    assert not (tmp_path / "run").exists()


def test_a_failed_overwrite_puts_a_party_dirs_old_files_back_and_takes_its_own_away(tmp_path, add_callback):
    out, parties = tmp_path / "run", tmp_path / "elsewhere"
    assert _run(out, *PARTY_DIRS, str(parties)) == 0
    before, party_before = _digests(out), _digests(parties)
    add_callback(FailAt(1, RuntimeError("a fault in the new run")))
    with pytest.raises(RuntimeError, match="a fault"):
        _run(out, *PARTY_DIRS, str(parties), "--overwrite", "--run.seed", "1")
    assert _digests(out) == before and _digests(parties) == party_before
    assert not (parties / PREVIOUS).exists()
    add_callback()
    assert _run(out, *PARTY_DIRS, str(parties), "--overwrite", "--run.seed", "1") == 0
    assert not (parties / PREVIOUS).exists() and _digests(parties) != party_before


def test_a_write_error_after_a_failed_overwrite_says_the_old_run_is_back(finished, capsys, add_callback):
    import errno

    out, before = finished
    add_callback(FailAt(1, OSError(errno.ENOSPC, "No space left on device", str(out / "checkpoints" / "x"))))
    assert _run(out, "--overwrite", "--run.seed", "1") == 1
    _one_line(capsys, "No space left on device", "run again with --overwrite (the outputs it was replacing are back")
    assert _digests(out) == before


def test_torchs_words_for_a_full_disk_become_no_space_left(tmp_path, monkeypatch):
    import shutil as sh
    from collections import namedtuple

    import torch

    from vcl.storage.checkpoints import atomic_torch_save

    def full_disk(obj, target):
        raise RuntimeError("basic_ios::clear: iostream error")

    monkeypatch.setattr(torch, "save", full_disk)
    monkeypatch.setattr(sh, "disk_usage", lambda p: namedtuple("Usage", "total used free")(100, 100, 0))
    with pytest.raises(OSError, match="No space left on device"):
        atomic_torch_save({"a": 1}, tmp_path / "x.ckpt")


def test_a_checkpoint_of_an_earlier_format_is_refused_in_one_sentence(finished, capsys):
    import torch

    out, _ = finished
    ckpt = out / "checkpoints" / "last.ckpt"
    state = torch.load(ckpt, weights_only=False)
    state["data"] = "0123abcd"  # a string digest, as one commit of this version wrote
    torch.save(state, ckpt)
    assert _run(out, "--resume") == 2
    _one_line(capsys, "is not a run checkpoint of this version of vcl")


@pytest.mark.parametrize("label", ["nan", "inf"])
def test_a_label_that_is_not_a_class(tmp_path, capsys, label):
    alice, bob = tmp_path / "alice.csv", tmp_path / "bob.csv"
    write_csv(alice, ["id", "a1", "label"], [(i, i * 0.1, label if i == 4 else i % 2) for i in range(20)])
    write_csv(bob, ["id", "b1"], [(i, i * 0.2) for i in range(20)])
    args = ["--data.dataset", "csv", "--data.task", "classification", "--data.organizations", "2"]
    assert _run(tmp_path / "run", *args, "--data.csv_files", str(alice), str(bob)) == 2
    _one_line(capsys, f"ID '4': the label '{label}' is not a class; give class labels")


def test_the_same_csv_file_for_two_organizations_is_refused(tmp_path, capsys, signal_csvs):
    args = ["--data.dataset", "csv", "--data.task", "classification", "--data.organizations", "3"]
    assert _run(tmp_path / "run", *args, "--data.csv_files", *signal_csvs, signal_csvs[1]) == 2
    _one_line(capsys, f"data.csv_files lists {signal_csvs[1]} twice")


def test_an_option_name_with_a_hidden_character_is_shown_escaped(tmp_path, capsys):
    assert cli.main(["--run.rounds\u200b", "2", "--out", str(tmp_path / "run")]) == 2
    _one_line(capsys, "unknown option 'run.rounds\\u200b' (it holds characters that do not show)")


@pytest.mark.parametrize("target", ["file", "nothing"])
def test_an_out_that_is_a_link_to_a_file_or_to_nothing(tmp_path, capsys, target):
    out = tmp_path / "run"
    if target == "file":
        (tmp_path / "f").write_text("x")
    out.symlink_to(tmp_path / "f")
    assert _run(out) == 2
    _one_line(capsys, f"--out {out} is a symbolic link to {'a file' if target == 'file' else 'nothing'}")


def test_once_the_run_is_over_signals_no_longer_end_the_process(tmp_path):
    import signal

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        assert _run(tmp_path / "run") == 0  # as a test: signals are given back
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
        assert cli.main(["--out", str(tmp_path / "again"), *QUICK], exiting=True) == 0  # as the program
        assert signal.getsignal(signal.SIGINT) == signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
