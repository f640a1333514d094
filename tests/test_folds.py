"""K-fold cross-validation (data.folds, data.fold): each row is a test row in exactly one fold, for the organizations'
tables, images and sequences and for DC's grid; what cannot take folds says so in one sentence."""

import numpy as np
import pytest

import train as cli
from vcl.config import RunConfig
from vcl.coordinator.assembly import datamodule_for
from vcl.errors import VCLInputError


def _test_rows(data) -> np.ndarray:
    """The test rows' features, Alice's (or the grid's first column group's) columns, as a set of row tuples."""
    if hasattr(data, "views"):
        return data.views[0].splits["test"].reshape(len(data.labels["test"]), -1).numpy()
    return data.parties[0][0].splits["test"].numpy()


@pytest.mark.parametrize(
    "values",
    [
        {"data.dataset": "wine", "data.organizations": 4},
        {"data.dataset": "digits_image", "data.organizations": 4},
        {"data.dataset": "sequence_synthetic", "data.organizations": 4, "data.sequence_size": 100},
        {"method": "dc_smote", "data.dataset": "wine", "dc.public_rows": 20, "dc.smote_k": 10},
    ],
    ids=["tabular", "image", "sequence", "dc-grid"],
)
def test_the_folds_test_splits_cover_every_row_once(values):
    folds, seen, sizes = 5, [], []
    for fold in range(folds):
        cfg = RunConfig.from_dict({**values, "data.folds": folds, "data.fold": fold, "compare": []})
        dm = datamodule_for(cfg)
        dm.setup()
        rows = _test_rows(dm.data)
        seen.append({tuple(np.round(r, 5)) for r in rows})
        sizes.append(len(rows))
    everything = set().union(*seen)
    assert sum(sizes) == len(everything) and max(sizes) - min(sizes) <= 1  # disjoint, and as even as K allows
    plain = datamodule_for(RunConfig.from_dict({**values, "compare": []}))
    plain.setup()
    assert {tuple(np.round(r, 5)) for r in _test_rows(plain.data)} != seen[0]  # fold 0, not test_fraction's rows


@pytest.mark.parametrize(
    "values,message",
    [
        ({"data.folds": 1}, "use at least 2 folds"),
        ({"data.folds": 5, "data.fold": 5}, "a fold in 0..folds-1"),
        ({"data.dataset": "ascii_blobs", "data.folds": 5}, "comes with its own test split"),
        ({"method": "mpdl", "data.dataset": "breast_cancer", "data.folds": 5}, "its K folds are mpdl.folds"),
    ],
)
def test_what_cannot_take_folds_is_refused_in_one_sentence(values, message):
    with pytest.raises(VCLInputError, match=message):
        cfg = RunConfig.from_dict({"data.dataset": "wine", **values, "compare": []})
        dm = datamodule_for(cfg)
        dm.setup()


def test_a_fold_runs_from_the_command_line(tmp_path):
    argv = ["--data.dataset", "wine", "--data.folds", "5", "--data.fold", "2", "--run.rounds", "1",
            "--learner.epochs", "5", "--compare", "--out", str(tmp_path / "f"), "--run.device", "cpu"]  # fmt: skip
    assert cli.main(argv) == 0


def test_dc_benchmarks_cross_validation_lists_valid_runs_of_every_fold():
    """benchmarks/dc.py --cv: Tables 6-7's setting on each data set, every method on the same five folds."""
    from tests.helpers import benchmark
    from vcl.coordinator.assembly import check_config

    dc = benchmark("dc")
    for ds, extra in dc.CV_DATA.items():
        for method in dc.CV_METHODS:
            values = {**dc.CV_CONFIG, **extra, "data.dataset": ds, "method": method}
            assert values["data.folds"] == 5 and "data.fold" not in values  # the driver sets each fold
            check_config(RunConfig.from_dict({**values, "data.fold": 4}))


def test_bootstrap_trains_on_a_draw_with_replacement_of_the_same_training_rows():
    from vcl.datamodules.tabular import Resampling, seeded_row_splits

    boot = Resampling(bootstrap=True)
    plain = seeded_row_splits(178, 3, 0.3, 0.0)
    drawn = seeded_row_splits(178, 3, 0.3, 0.0, resample=boot)
    assert list(drawn["test"]) == list(plain["test"])  # the test rows stay as they were
    assert len(drawn["train"]) == len(plain["train"]) and set(drawn["train"]) < set(plain["train"])  # repeats
    assert list(seeded_row_splits(178, 3, 0.3, 0.0, resample=boot)["train"]) == list(drawn["train"])  # seeded
    assert list(seeded_row_splits(178, 4, 0.3, 0.0, resample=boot)["test"]) != list(drawn["test"])


def test_an_ascii_run_trains_on_a_bootstrap_replication(tmp_path):
    argv = ["--method", "ascii", "--data.dataset", "wine", "--data.organizations", "2", "--data.test_fraction", "0.3",
            "--data.bootstrap", "true", "--learner.model", "tree", "--run.rounds", "3", "--compare",
            "--out", str(tmp_path / "b"), "--run.device", "cpu"]  # fmt: skip
    assert cli.main(argv) == 0
    with pytest.raises(VCLInputError, match="row groups once"):
        datamodule_for(RunConfig.from_dict({"method": "dc_smote", "data.dataset": "wine", "data.bootstrap": True,
                                            "dc.public_rows": 20, "dc.smote_k": 10, "compare": []}))  # fmt: skip
