"""train.py predict: a finished run's kept models score new people, each organization preparing its own new rows as
it prepared its training rows; on the test split given as new files it reproduces the run's own prediction stage."""

from __future__ import annotations

import csv
import json
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.datasets import load_wine
from vcl.callbacks import RoundCallback
from vcl.datamodules.tabular import seeded_row_splits

from tests.helpers import KillParty, Stop
from train import main
from vcl.coordinator.assembly import datamodule_for
from vcl.coordinator.runner import default_callbacks, train
from vcl.use.predict import predict

COLUMNS = {"alice": [0, 1, 2, 3, 4], "bob": [5, 6, 7, 8], "carol": [9, 10, 11, 12]}


def federation_files(folder: Path) -> list[Path]:
    """Wine's columns in three files, each in its own row order: Alice's with the label (class names as text), Bob's
    with a text column (one-hot encoded), Carol's with missing cells (imputed)."""
    X, y = load_wine(return_X_y=True)
    rng = np.random.RandomState(0)
    region = np.array(["north", "south", "east"])[rng.randint(0, 3, len(y))]
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, cols in COLUMNS.items():
        header = ["id", *(f"f{c}" for c in cols), *(["label"] if name == "alice" else [])]
        header += ["region"] if name == "bob" else []
        rows = []
        for i in rng.permutation(len(y)):
            values = [f"{X[i, c]:.6g}" for c in cols]
            if name == "carol" and i % 17 == 0:
                values[1] = ""
            extra = [f"c{y[i]}"] if name == "alice" else [region[i]] if name == "bob" else []
            rows.append([f"w{i:03d}", *values, *extra])
        paths.append(folder / f"{name}.csv")
        with open(paths[-1], "w", newline="") as f:
            csv.writer(f).writerows([header, *rows])
    return paths


CSV = {
    "data.dataset": "csv",
    "data.task": "classification",
    "data.categorical": ["error", "onehot", "error"],
    "data.missing": ["error", "error", "impute"],
    "data.organizations": 3,
    "run.rounds": 3,
    "learner.epochs": 10,
}


METHODS = {  # the methods that keep models for new people, with settings they take on these files
    "gal": {},
    "late": {},
    "interm": {"learner.model": ["mlp"]},
    "ascii": {"learner.model": ["tree", "logistic", "tree"], "learner.max_depth": 3},
}


def split_ids(files: list[Path], config) -> list[str]:
    """The IDs of the run's test split, in its order (the aligned IDs are sorted; the split permutes them)."""
    ids = sorted(row[0] for row in list(csv.reader(open(files[0])))[1:])
    d = config.data
    return [ids[i] for i in seeded_row_splits(len(ids), d.split_seed, d.test_fraction, d.val_fraction)["test"]]


def new_files_of_test_split(files: list[Path], config, folder: Path) -> list[Path]:
    """The rows of the run's test split, each organization's from its own file, Alice's without her label."""
    test = set(split_ids(files, config))
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for path in files:
        rows = list(csv.reader(open(path)))
        keep = [c for c, name in enumerate(rows[0]) if name != "label"]
        out.append(folder / path.name)
        with open(out[-1], "w", newline="") as f:
            csv.writer(f).writerows([[r[c] for c in keep] for r in rows if r[0] in test or r is rows[0]])
    return out


@contextmanager
def three_parties(tiny, tmp_path, **settings):
    """Alice, Bob and Carol as grpc party processes on their own files (and files of new people: the run's test
    split); the run's config with ``settings`` (transport.deadline 20 s), the three files and the new ones."""
    from vcl.transports.loopback import LoopbackFederation

    files = federation_files(tmp_path / "data")
    base = {**CSV, **settings}
    new = new_files_of_test_split(files, tiny(**base), tmp_path / "new")
    own = {n: {"csv": str(files[k]), "predict_csv": str(new[k])} for k, n in enumerate(("alice", "bob", "carol"))}
    with LoopbackFederation(tmp_path / "fed", ["alice", "bob", "carol"], own=own) as fed:
        config = tiny(**{**base, **fed.overrides(), "data.csv_files": [str(files[0]), "bob", "carol"]})
        config.transport.deadline = 20.0
        yield fed, config, files, new


class StageOutputs(RoundCallback):
    """What the run's own prediction stage gives on the test split, computed by the run before its parties go."""

    def on_run_end(self, run, results):
        protocol, upto = run.protocol, results["prediction_stage_round"]
        F = protocol.predict("test", upto=upto) if upto < protocol.round else protocol.predict("test")
        self.probabilities = protocol.probabilities(F).cpu().numpy()


def trained(config) -> tuple[dict, StageOutputs]:
    stage = StageOutputs()
    return train(config, verbose=False, callbacks=[*default_callbacks(config, False), stage]), stage


def read_predictions(path: Path) -> tuple[list[str], list[str], np.ndarray, list[str]]:
    rows = list(csv.reader(open(path)))
    header, body = rows[0], rows[1:]
    return [r[0] for r in body], [r[1] for r in body], np.array([r[2:] for r in body], dtype=float), header


def assert_reproduces_the_stage(results, stage, path: Path, files: list[Path], config) -> None:
    ids, classes, probabilities, header = read_predictions(path)
    assert header[:2] == ["id", "prediction"] and header[2:] == ["p_c0", "p_c1", "p_c2"]
    assert ids == sorted(ids)  # the new rows in the aligned (sorted) order of their IDs
    order = [ids.index(i) for i in split_ids(files, config)]  # the stage's rows: the test split's order
    np.testing.assert_allclose(probabilities[order], stage.probabilities, rtol=0, atol=1e-6)
    test_labels = labels_of(files[0])
    assert classes == [header[2 + k][2:] for k in probabilities.argmax(1)]
    accuracy = np.mean([test_labels[i] == c for i, c in zip(ids, classes, strict=True)])
    assert accuracy == pytest.approx(results["prediction_stage"]["test"], abs=1e-6)  # the metric in float32


def labels_of(path: Path) -> dict[str, str]:
    rows = list(csv.reader(open(path)))
    return {r[0]: r[rows[0].index("label")] for r in rows[1:]}


def moved_away(files: list[Path]) -> list[Path]:
    """The training files moved out of their folder (where the run read them): a prediction may not read them."""
    away = files[0].parent.with_name(files[0].parent.name + "-away")
    files[0].parent.rename(away)
    return [away / f.name for f in files]


@pytest.mark.parametrize("method", [*METHODS, "alone", "joint"])
def test_the_test_split_given_as_new_files_reproduces_the_runs_prediction_stage(tiny, tmp_path, method):
    """With the training files moved away: each organization prepares its new rows with the preparation it kept in
    its own checkpoint (a text column one-hot, empty cells imputed, z-scores), and Alice takes F⁰ from hers (Alone:
    Alice's party alone keeps one; Joint: its one party keeps every organization's)."""
    files = federation_files(tmp_path / "data")
    config = tiny(method=method, **CSV, **METHODS.get(method, {}), **{"data.csv_files": [str(f) for f in files]})
    results, stage = trained(config)
    new = new_files_of_test_split(files, config, tmp_path / "new")
    files = moved_away(files)
    scored = predict(config.run_dir, [str(f) for f in new], tmp_path / "p.csv", verbose=False)
    assert len(scored["ids"]) == len(stage.probabilities)
    assert_reproduces_the_stage(results, stage, tmp_path / "p.csv", files, config)


def test_a_built_in_data_sets_test_split_is_scored_through_the_command_line(tiny, tmp_path, capsys):
    config = tiny(**{"run.rounds": 2, "learner.epochs": 5})
    results, stage = trained(config)
    out = tmp_path / "p.csv"
    assert main(["predict", "--out", str(config.run_dir), "--predictions", str(out)]) == 0
    assert "predictions (the models of rounds 1..2)" in capsys.readouterr().out
    rows, classes, probabilities, header = read_predictions(out)
    assert header[0] == "row" and rows == [str(i) for i in range(len(rows))]
    np.testing.assert_allclose(probabilities, stage.probabilities, rtol=0, atol=1e-6)
    dm = datamodule_for(config)
    dm.setup()
    accuracy = (torch.tensor([int(c) for c in classes]) == dm.data.labels["test"]).double().mean().item()
    assert accuracy == pytest.approx(results["prediction_stage"]["test"], abs=1e-6)  # the metric in float32


def test_bad_input_is_one_sentence_exit_2_and_writes_nothing(tiny, tmp_path, capsys):
    files = federation_files(tmp_path / "data")
    config = tiny(**{**CSV, "data.csv_files": [str(f) for f in files], "run.rounds": 1})
    out = tmp_path / "p.csv"
    assert main(["predict", "--out", str(tmp_path / "nothing"), "--predictions", str(out)]) == 2
    assert "holds no completed run" in capsys.readouterr().err
    trained(config)
    new = new_files_of_test_split(files, config, tmp_path / "new")
    args = ["predict", "--out", str(config.run_dir), "--predictions", str(out), "--data.csv_files"]
    assert main([*args, *map(str, new[:2])]) == 2
    assert "needs 3 files of new people" in capsys.readouterr().err
    rows = list(csv.reader(open(new[1])))  # Bob's new file lacks a column he trained on
    with open(new[1], "w", newline="") as f:
        csv.writer(f).writerows([r[:-2] + r[-1:] for r in rows])
    assert main([*args, *map(str, new)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lacks ['f8']" in err and str(new[1]) in err
    rows[1][2] = "many"  # a text cell in a column that was numbers in training
    with open(new[1], "w", newline="") as f:
        csv.writer(f).writerows(rows)
    assert main([*args, *map(str, new)]) == 2
    err = capsys.readouterr().err
    assert "'many' is not a number" in err and rows[1][0] in err
    assert not out.exists() and not list(tmp_path.glob(".p.csv*"))
    out.write_text("mine\n")  # a file predict did not write is never replaced
    assert main(["predict", "--out", str(config.run_dir), "--predictions", str(out), "--data.csv_files",
                 *map(str, new_files_of_test_split(files, config, tmp_path / "again"))]) == 2  # fmt: skip
    assert "exists" in capsys.readouterr().err and out.read_text() == "mine\n"
    results = json.loads((config.run_dir / "results.json").read_text())
    assert results["method"] == "gal"


def made_before_parties_kept_preparations(config, version: int = 1) -> None:
    """The run's checkpoints as vcl wrote them before parties kept their preparation: the coordinator's names no
    task and classes (and, ``version`` 1, digested the data as vcl did then), the parties' keep none."""
    from vcl.coordinator.digest import data_digest
    from vcl.coordinator.runner import run_data

    run_dir = config.run_dir
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    state = torch.load(ckpt, weights_only=False)
    state["data"].pop("kept", None)
    state["data"]["version"] = version
    state["data"]["digest"] = data_digest(run_data(config), state["data"]["hash"], version)
    torch.save(state, ckpt)
    for path in (run_dir / "parties").glob("*/round-*.ckpt"):
        saved = torch.load(path, weights_only=False)
        torch.save({k: v for k, v in saved.items() if k != "preparation"}, path)


def test_a_run_made_before_parties_kept_their_preparation_predicts_from_its_training_files(tiny, tmp_path, capsys):
    """Such a run prepares new rows from its training files, as vcl did then: with them it predicts as the run did;
    with one changed (a digest of version 2) or gone, one sentence says what to do, exit 2, no file written."""
    files = federation_files(tmp_path / "data")
    config = tiny(**{**CSV, "data.csv_files": [str(f) for f in files], "run.rounds": 2})
    results, stage = trained(config)
    new = [str(f) for f in new_files_of_test_split(files, config, tmp_path / "new")]
    made_before_parties_kept_preparations(config)
    out = tmp_path / "p.csv"
    args = ["predict", "--out", str(config.run_dir), "--predictions", str(out), "--data.csv_files", *new]
    assert main(args) == 0
    assert_reproduces_the_stage(results, stage, out, files, config)
    out.unlink()
    made_before_parties_kept_preparations(config, version=2)
    Path(files[2]).write_text(Path(files[2]).read_text().replace("w001,", "w001x,"))  # training data changed
    assert main(args) == 2
    assert "training data differ" in capsys.readouterr().err and not out.exists()
    files[2].unlink()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "trained before vcl kept" in err and str(files[2]) in err and not out.exists()


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_under_ray_each_party_scores_its_own_new_rows_in_its_own_process(tiny, tmp_path):
    files = federation_files(tmp_path / "data")
    runs = {}
    for method, extra in METHODS.items():
        base = {**CSV, **extra, "data.csv_files": [str(f) for f in files], "transport.kind": "ray"}
        config = tiny(method=method, out=str(tmp_path / method), **base)
        runs[method] = config, *trained(config)
    new = new_files_of_test_split(files, config, tmp_path / "new")
    files = moved_away(files)  # each actor builds its party from its own checkpoint and its new rows alone
    for method, (config, results, stage) in runs.items():
        predict(config.run_dir, [str(f) for f in new], tmp_path / f"{method}.csv", verbose=False)
        assert_reproduces_the_stage(results, stage, tmp_path / f"{method}.csv", files, config)


@pytest.mark.slow
def test_under_grpc_each_party_reads_its_own_file_of_new_people_where_it_runs(tiny, tmp_path):
    from vcl.transports.loopback import LoopbackFederation

    files = federation_files(tmp_path / "data")
    new = new_files_of_test_split(files, tiny(**CSV), tmp_path / "new")
    own = {n: {"csv": str(files[k]), "predict_csv": str(new[k])} for k, n in enumerate(("alice", "bob", "carol"))}
    with LoopbackFederation(tmp_path / "fed", ["alice", "bob", "carol"], own=own) as fed:
        runs = {}
        for method, extra in METHODS.items():
            base = {**CSV, **extra, **fed.overrides(), "data.csv_files": [str(files[0]), "bob", "carol"]}
            config = tiny(method=method, out=str(tmp_path / method), **base)
            runs[method] = config, *trained(config)
        files = moved_away(files)  # each party reads its own checkpoint and its file of new people, where it runs
        for k, name in enumerate(("alice", "bob", "carol")):  # its config now names no training file at all
            fed.kill(name)
            fed.own[name] = {"predict_csv": str(new[k])}
            fed.restart(name)
        for method, (config, results, stage) in runs.items():
            predict(config.run_dir, [str(new[0]), "bob", "carol"], tmp_path / f"{method}.csv", verbose=False)
            assert_reproduces_the_stage(results, stage, tmp_path / f"{method}.csv", files, config)


@pytest.mark.slow
def test_a_party_killed_after_round_2_is_left_out_and_prediction_goes_on_without_it(tiny, tmp_path, capsys):
    """run.missing_parties: skip under grpc: Carol's process ends after round 2; rounds 3 and 4 weigh Alice and
    Bob only, the run completes and says so; predict with Carol still down scores every row without her and marks
    them, as the run's own prediction stage did."""
    with three_parties(tiny, tmp_path, **{"run.rounds": 4, "run.missing_parties": "skip"}) as (fed, config, files, new):
        stage = StageOutputs()
        callbacks = [*default_callbacks(config, False), KillParty(2, fed, "carol"), stage]
        results = train(config, verbose=False, callbacks=callbacks)
        assert [r["round"] for r in results["rounds"]] == [0, 1, 2, 3, 4]
        assert results["missing_rounds"] == {"carol": [3, 4]} and results["missing_at_prediction"] == ["carol"]
        for record in results["rounds"][3:]:
            assert record["missing"] == ["carol"] and record["coefficients"][2] == 0.0
            assert sum(record["weights"][:2]) == pytest.approx(1.0, abs=1e-6)  # the simplex of those present
        assert all(c != 0.0 for c in results["rounds"][1]["coefficients"])  # Carol's rounds 1-2 models stay kept
        out = tmp_path / "p.csv"
        args = ["predict", "--out", str(config.run_dir), "--predictions", str(out), "--data.csv_files"]
        assert main([*args, str(new[0]), "bob", "carol"]) == 0
        assert "without carol (down)" in capsys.readouterr().out
    rows = list(csv.reader(open(out)))
    assert rows[0][-1] == "missing" and {r[-1] for r in rows[1:]} == {"carol"}
    ids = [r[0] for r in rows[1:]]
    probabilities = np.array([r[2:-1] for r in rows[1:]], dtype=float)
    order = [ids.index(i) for i in split_ids(files, config)]
    np.testing.assert_allclose(probabilities[order], stage.probabilities, rtol=0, atol=1e-6)


class Restart(RoundCallback):
    """Starts ``party``'s process of a :class:`vcl.transports.loopback.LoopbackFederation` again (on its own machine's
    files) at the end of round ``at``."""

    def __init__(self, at, federation, party):
        self.at, self.federation, self.party = at, federation, party

    def on_round_end(self, run, record):
        if record["round"] == self.at:
            self.federation.restart(self.party)


@pytest.mark.slow
def test_a_party_killed_after_round_2_and_restarted_rejoins_at_round_4(tiny, tmp_path):
    """Rejoin under grpc: Carol's process ends after round 2 and starts again after round 3; before round 4 the
    coordinator sets her up again and she reads her own checkpoint of round 2, so rounds 1, 2 and 4 keep her models,
    the run's prediction stage is Alice's running F, and train.py predict with the new files reproduces it."""
    with three_parties(tiny, tmp_path, **{"run.rounds": 4, "run.missing_parties": "skip"}) as (fed, config, files, new):
        stage, kept = StageOutputs(), KeptModels()
        callbacks = [*default_callbacks(config, False), KillParty(2, fed, "carol"), Restart(3, fed, "carol")]
        results = train(config, verbose=False, callbacks=[*callbacks, stage, kept])
        assert results["missing_rounds"] == {"carol": [3]} and results["rejoined_rounds"] == {"carol": [4]}
        assert results["missing_at_prediction"] == []
        assert [r["coefficients"][2] != 0.0 for r in results["rounds"][1:]] == [True, True, False, True]
        torch.testing.assert_close(kept.stage, kept.running, rtol=0, atol=1e-5)
        predict(config.run_dir, [str(new[0]), "bob", "carol"], tmp_path / "p.csv", verbose=False)
        assert_reproduces_the_stage(results, stage, tmp_path / "p.csv", files, config)


def test_skip_is_refused_for_a_method_that_cannot_leave_an_organization_out(tiny):
    from vcl.coordinator.assembly import check_config
    from vcl.errors import VCLInputError

    with pytest.raises(VCLInputError, match="method late cannot leave an organization out"):
        check_config(tiny(method="late", **{"run.missing_parties": "skip"}))
    check_config(tiny(compare=["alone"], **{"run.missing_parties": "skip"}))


class DCOutputs(RoundCallback):
    """The DC run's own prediction of the test rows (F["test"]: h on each row group's collaboration representation,
    averaged over the row groups), and its accuracy as the experimenter scored it."""

    def on_run_end(self, run, results):
        self.probabilities = run.protocol.probabilities(run.protocol.F["test"]).numpy()


@pytest.mark.parametrize("transport", ["local", *(pytest.param(t, marks=pytest.mark.slow) for t in ("ray", "grpc"))])
def test_dc_scores_the_test_split_through_each_workers_mapping_as_the_run_did(tiny, tmp_path, transport, request):
    from contextlib import ExitStack

    from tests.helpers import TINY_DC
    from vcl.testing.suite import DC_NAMES
    from vcl.transports.loopback import LoopbackFederation

    with ExitStack() as stack:
        if transport == "ray":
            request.getfixturevalue("ray_cluster")
        where = {"transport.kind": transport}
        if transport == "grpc":
            where = stack.enter_context(LoopbackFederation(tmp_path / "fed", DC_NAMES)).overrides(DC_NAMES)
        check_dc_prediction(tiny(method="dc_smote", **TINY_DC, **where), tmp_path)


def check_dc_prediction(config, tmp_path) -> None:
    stage = DCOutputs()
    results = train(config, verbose=False, callbacks=[*default_callbacks(config, False), stage])
    out = tmp_path / "p.csv"
    scored = predict(config.run_dir, [], out, verbose=False)
    rows, classes, probabilities, header = read_predictions(out)
    assert header[0] == "row" and len(rows) == len(stage.probabilities) == len(scored["ids"])
    np.testing.assert_allclose(probabilities, stage.probabilities, rtol=0, atol=1e-6)
    dm = datamodule_for(config)
    dm.setup()
    labels = dm.data.labels["test"].numpy()
    accuracy = float(np.mean(np.array([int(c) for c in classes]) == labels))
    # the run's own F["test"] (the row groups' scores averaged), not collab_accuracy (each group's accuracy, averaged)
    assert accuracy == pytest.approx(float(np.mean(stage.probabilities.argmax(1) == labels)), abs=1e-9)
    assert accuracy > 0.8 and results["rounds"][-1]["scores"]["collab_accuracy"] > 0.8


def test_a_dc_reference_is_refused_in_one_sentence(tiny, tmp_path, capsys):
    from tests.helpers import TINY_DC

    config = tiny(method="local", **TINY_DC)
    train(config, verbose=False)
    assert main(["predict", "--out", str(config.run_dir), "--predictions", str(tmp_path / "p.csv")]) == 2
    assert "keeps no model that scores new people" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["gal", "al"])
def test_gal_and_al_go_on_without_an_organization_lost_from_round_2(tiny, monkeypatch, method):
    """The skip logic on its own, in one process: org2 answers nothing from round 2 on (its place holds its
    PartyLost, as a transport whose party died returns it)."""
    from vcl.errors import PartyLost
    from vcl.transports.local import LocalTransport

    real = LocalTransport.deliver

    def deliver(self, requests):
        gone = {i for i, (party, message) in enumerate(requests) if party == "org2" and message.round >= 2}
        kept = real(self, [r for i, r in enumerate(requests) if i not in gone]) if len(gone) < len(requests) else []
        answers = iter(kept)
        return [PartyLost("org2", "round 2") if i in gone else next(answers) for i in range(len(requests))]

    monkeypatch.setattr(LocalTransport, "deliver", deliver)
    config = tiny(method=method, **{"data.organizations": 3, "run.missing_parties": "skip", "learner.epochs": 5})
    results = train(config, verbose=False, write=False)
    assert results["missing_rounds"] == {"org2": [2, 3]} and results["missing_at_prediction"] == ["org2"]
    first, *later = results["rounds"][1:]
    assert "missing" not in first and all(c != 0.0 for c in first["coefficients"])
    for record in later:
        assert record["missing"] == ["org2"] and record["coefficients"][2] == 0.0 and record["weights"][2] == 0.0
    with pytest.raises(PartyLost, match="org2"):
        train(tiny(method=method, **{"data.organizations": 3, "learner.epochs": 5}), verbose=False, write=False)


@pytest.mark.slow
def test_a_party_down_for_the_whole_run_and_up_at_prediction_adds_nothing(tiny, tmp_path):
    """Under grpc and skip, Carol's process is down from the start (she aligns no row, saves no round); at prediction,
    the training files moved away, she is up: she is set up again from no checkpoint (no preparation, no model),
    reads her new people's IDs for the alignment, answers with no model, and the file equals the run's own stage."""
    with three_parties(tiny, tmp_path, **{"run.missing_parties": "skip"}) as (fed, config, files, new):
        fed.kill("carol")
        results, stage = trained(config)
        assert results["missing_at_prediction"] == ["carol"]
        fed.restart("carol")
        files = moved_away(files)
        scored = predict(config.run_dir, [str(new[0]), "bob", "carol"], tmp_path / "p.csv", verbose=False)
        assert scored["missing"] == []
        assert_reproduces_the_stage(results, stage, tmp_path / "p.csv", files, config)


class KeptModels(RoundCallback):
    """Alice's running F on the test split, and what the prediction stage gives from the models the parties keep."""

    def on_run_end(self, run, results):
        self.running, self.stage = run.protocol.F["test"].clone(), run.protocol.predict("test")


@pytest.mark.parametrize("method", ["gal", "al"])
def test_an_organization_lost_in_round_2_rejoins_from_its_own_round_1(tiny, monkeypatch, tmp_path, method):
    """Rejoin, in one process: org2 answers nothing in round 2; before round 3 it answers again (the transport sets
    it up again), reads its own checkpoint of round 1 and fits rounds 3 and 4, so the models kept give Alice's
    running F. A run interrupted after round 2 and resumed with org2 back takes it back at the resume."""
    from vcl.coordinator.runner import RunInterrupted
    from vcl.errors import PartyLost
    from vcl.testing.suite import rounds_of
    from vcl.transports.local import LocalTransport

    real, down = LocalTransport.deliver, {2}

    def deliver(self, requests):
        gone = {i for i, (party, message) in enumerate(requests) if party == "org2" and message.round in down}
        kept = real(self, [r for i, r in enumerate(requests) if i not in gone]) if len(gone) < len(requests) else []
        answers = iter(kept)
        return [PartyLost("org2", "round 2") if i in gone else next(answers) for i in range(len(requests))]

    monkeypatch.setattr(LocalTransport, "deliver", deliver)
    monkeypatch.setattr(LocalTransport, "rejoin", lambda self, party: True)
    base = {"data.organizations": 3, "run.missing_parties": "skip", "learner.epochs": 5, "run.rounds": 4}
    config = tiny(method=method, out=str(tmp_path / "whole"), **base)
    kept = KeptModels()
    results = train(config, verbose=False, callbacks=[*default_callbacks(config, False), kept])
    assert results["missing_rounds"] == {"org2": [2]} and results["rejoined_rounds"] == {"org2": [3]}
    assert results["missing_at_prediction"] == [] and results["rounds"][3]["rejoined"] == ["org2"]
    assert [r["coefficients"][2] != 0.0 for r in results["rounds"][1:]] == [True, False, True, True]
    torch.testing.assert_close(kept.stage, kept.running, rtol=0, atol=1e-5)  # every model it fitted is kept

    cut = tiny(method=method, out=str(tmp_path / "cut"), **base)
    with pytest.raises(RunInterrupted):
        train(cut, verbose=False, callbacks=[*default_callbacks(cut, False), Stop(2)])
    down.clear()  # org2 is back for the resume: its own round 1, as the checkpoint of round 2 says
    resumed = train(cut, resume=True, verbose=False)
    assert resumed["missing_rounds"] == {"org2": [2]} and resumed["rejoined_rounds"] == {"org2": [3]}
    assert rounds_of(resumed) == rounds_of(results)


def test_a_class_the_run_names_is_imported_only_when_the_user_names_it_too(tiny, tmp_path, capsys):
    user = {"class_path": "tests.lightning_user.Net", "init_args": {"hidden": 8}}
    config = tiny(**{"learner.model": [user], "run.rounds": 1, "learner.epochs": 2, "data.organizations": 2})
    train(config, verbose=False)
    args = ["predict", "--out", str(config.run_dir), "--predictions", str(tmp_path / "p.csv")]
    assert main(args) == 2
    assert "names class tests.lightning_user.Net" in capsys.readouterr().err and not (tmp_path / "p.csv").exists()
    assert main([*args, "--allow_classes", "tests.lightning_user.Net"]) == 0
    assert (tmp_path / "p.csv").is_file()


def test_dc_with_xgboost_scores_new_rows_from_its_stored_models_as_the_run_did(tiny, tmp_path):
    """XGBoost as the master's analysis and the workers' interpretable model (DC's Tables 2–5): stored with skops
    in the checkpoints and loaded for the prediction stage."""
    from tests.helpers import TINY_DC

    check_dc_prediction(tiny(method="dc_smote", **TINY_DC, **{"dc.central": "xgboost", "dc.interpretable": "xgboost"}),
                        tmp_path)  # fmt: skip


class MPDLOutputs(RoundCallback):
    """The MPDL run's own scores of its test rows (dual_T: M_D on both parties' features) and of the rows only A
    holds (MPDL_A: M_D with B's columns generated by A's f), computed by the run."""

    def on_run_end(self, run, results):
        self.F = {s: run.protocol.F[s].clone() for s in ("test", "a_only")}
        self.probabilities = run.protocol.probabilities(run.protocol.F["test"]).numpy()


@pytest.mark.parametrize("central", ["mlp", "cnn"])
def test_mpdl_scores_the_test_split_with_its_kept_central_model_as_the_run_did(tiny, tmp_path, capsys, central):
    """MPDL's model for new rows is M_D, the central model Algorithm 1 outputs: kept at C (its top) and at each party
    (its bottom), it scores the test split through ``train.py predict`` as the run scored it (dual_T), and the rows
    only A holds through A's dual model f as the run did (MPDL_A); a run made before M_D was kept is refused."""
    from tests.helpers import TINY_MPDL
    from vcl.storage.checkpoints import PARTY_KEYS, load_checkpoint
    from vcl.use.predict import Deployed

    images = {"data.dataset": "digits_image", "mpdl.max_rows": 300, "mpdl.lam": 1e-4}  # the CNN's bottom: a conv
    options = {**TINY_MPDL, "mpdl.threshold": 1.0, "mpdl.central": central, **(images if central == "cnn" else {})}
    config = tiny(method="mpdl", **options)
    stage = MPDLOutputs()
    results = train(config, verbose=False, callbacks=[*default_callbacks(config, False), stage])
    out = tmp_path / "p.csv"
    assert main(["predict", "--out", str(config.run_dir), "--predictions", str(out)]) == 0
    assert f"mpdl: {len(stage.probabilities)} predictions" in capsys.readouterr().out
    rows, classes, probabilities, header = read_predictions(out)
    assert header[:3] == ["row", "prediction", "p_0"] and rows == [str(i) for i in range(len(rows))]
    np.testing.assert_allclose(probabilities, stage.probabilities, rtol=0, atol=1e-6)
    dm = datamodule_for(config)
    dm.setup()
    accuracy = float(np.mean(np.array([int(c) for c in classes]) == dm.data.labels["test"].numpy()))
    assert accuracy == pytest.approx(results["prediction_stage"]["test"], abs=1e-6)
    assert accuracy == pytest.approx(results["rounds"][-1]["scores"]["dual_t"], abs=1e-6)

    deployed = Deployed(config.run_dir, [])  # the run opened again: the rows only A holds, and a few test rows
    try:
        torch.testing.assert_close(deployed.protocol.predict("a_only"), stage.F["a_only"], rtol=0, atol=1e-6)
        picked = torch.tensor([3, 0, 5])  # what the prediction service asks (vcl.use.serve)
        torch.testing.assert_close(deployed.score(picked)["F"], stage.F["test"][picked], rtol=0, atol=1e-6)
    finally:
        deployed.close()

    ckpt = config.run_dir / "checkpoints" / "last.ckpt"  # as a run made before M_D was kept left its checkpoints
    state = load_checkpoint(ckpt)
    del state["protocol"]["central"]
    torch.save(state, ckpt)
    parties = sorted((config.run_dir / "parties").glob("[ab]/*.ckpt"))
    assert len(parties) == 2
    for path in parties:
        party = load_checkpoint(path, PARTY_KEYS)
        del party["state"]["central"]
        torch.save(party, path)
    out.unlink()
    assert main(["predict", "--out", str(config.run_dir), "--predictions", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "made before vcl kept MPDL's M_D" in err and not out.exists()


def test_ftl_is_refused_in_one_sentence(tiny, tmp_path, capsys):
    from tests.helpers import TINY_MPDL

    config = tiny(method="ftl", **TINY_MPDL)
    train(config, verbose=False)
    assert main(["predict", "--out", str(config.run_dir), "--predictions", str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "method ftl keeps no model that scores new people" in err
