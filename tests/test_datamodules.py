"""The vertical split: every feature once, remainder to the last, train statistics, CSV per organization."""

import numpy as np
import pytest
import torch
from vcl.datamodules import TabularDataModule, random_column_split
from vcl.datamodules.csv_files import load_csv_organizations

from tests.conftest import write_csv
from vcl.errors import VCLInputError


@pytest.mark.parametrize("d,m", [(13, 8), (4, 4), (30, 8), (10, 3), (64, 2)])
def test_random_split_covers_every_feature_once(d, m):
    groups = random_column_split(d, m, seed=3)
    flat = sorted(i for g in groups for i in g)
    assert flat == list(range(d))
    assert [len(g) for g in groups[:-1]] == [d // m] * (m - 1)
    assert len(groups[-1]) == d - (m - 1) * (d // m)


def test_wine_m8_matches_reference_shape_and_zscores_with_train_statistics():
    dm = TabularDataModule("wine", organizations=8, feature_seed=0)
    dm.setup()
    sizes = [v.num_features for v in dm.data.views]
    assert sizes == [1] * 7 + [6]
    train = torch.cat([v.splits["train"] for v in dm.data.views], 1)
    assert torch.allclose(train.mean(0), torch.zeros(13), atol=1e-5)
    assert dm.data.labels["train"].shape[0] == 142 and dm.data.labels["test"].shape[0] == 36


def test_row_split_fixed_across_run_seeds_and_feature_split_changes():
    a = TabularDataModule("wine", organizations=4, feature_seed=0)
    b = TabularDataModule("wine", organizations=4, feature_seed=1)
    a.setup(), b.setup()
    assert torch.equal(a.data.labels["test"], b.data.labels["test"])
    assert [v.columns for v in a.data.views] != [v.columns for v in b.data.views]


def test_validation_fraction_carves_from_train():
    dm = TabularDataModule("breast_cancer", organizations=2, val_fraction=0.25)
    dm.setup()
    n = {s: y.shape[0] for s, y in dm.data.labels.items()}
    assert n == {"train": 341, "val": 114, "test": 114}


def test_named_assignment():
    cols = ["alcohol", "malic_acid"]
    dm = TabularDataModule("wine", assignment={"alice": cols, "bob": ["proline"]})
    dm.setup()
    assert [v.columns for v in dm.data.views] == [cols, ["proline"]]
    assert [v.name for v in dm.data.views] == ["alice", "bob"]


def test_csv_inner_join_aligns_rows_by_id(tmp_path):
    rows = [(3, 30, 1), (1, 10, 0), (2, 20, 1), (9, 90, 0), (5, 50, 0), (6, 60, 1)]
    alice = write_csv(tmp_path / "a.csv", ["id", "x", "label"], rows)
    bob = write_csv(tmp_path / "b.csv", ["id", "z"], [(1, -1), (2, -2), (3, -3), (4, -4), (6, -6), (5, -5)])
    dm = TabularDataModule("csv", csv_files=[alice, bob], task="classification", test_fraction=0.4)
    dm.setup()
    x = torch.cat([dm.data.views[0].splits[s] for s in ("train", "test")])
    z = torch.cat([dm.data.views[1].splits[s] for s in ("train", "test")])
    # z-scored per column, so the alignment shows as a perfect negative correlation between x and z
    corr = np.corrcoef(x.ravel().numpy(), z.ravel().numpy())[0, 1]
    assert corr == pytest.approx(-1.0)
    assert [v.name for v in dm.data.views] == ["a", "b"]


@pytest.mark.parametrize(
    "alice_rows,bob_rows,message",
    [
        ([(1, 1.0, 0), (1, 2.0, 1), (2, 3.0, 1)], [(1, 1), (2, 2)], "repeats ID"),
        ([(1, 1.0, 0), (2, 2.0, 1)], [(7, 1), (8, 2)], "share no value"),
        ([(1, "nan", 0), (2, 2.0, 1), (3, 3.0, 0)], [(1, 1), (2, 2), (3, 3)], "NaN"),
        ([(1, 1.0, 0.5), (2, 2.0, 1), (3, 3.0, 0)], [(1, 1), (2, 2), (3, 3)], "non-integer"),
        ([(1, 1.0, 0), (2, 2.0, ""), (3, 3.0, 1)], [(1, 1), (2, 2), (3, 3)], "has empty labels in 'label'"),
        ([(5, 1.0, "nan"), (1, 1.0, 0), (2, 2.0, 0), (4, 3.0, "inf"), (3, 2.0, 1)], [(i, i) for i in range(1, 6)],
         "ID '4': the label 'inf' is not a class"),  # the first aligned row holding such a label is named
    ],
)  # fmt: skip
def test_csv_bad_input(tmp_path, alice_rows, bob_rows, message):
    alice = write_csv(tmp_path / "a.csv", ["id", "x", "label"], alice_rows)
    bob = write_csv(tmp_path / "b.csv", ["id", "z"], bob_rows)
    with pytest.raises(VCLInputError, match=message):
        TabularDataModule("csv", csv_files=[alice, bob], task="classification").setup()


@pytest.mark.parametrize(
    "alice_ids, bob_ids, why",
    [
        (["A1", "B2", "C3"], ["a1", "b2", "x"], "would share 2 if upper and lower case were ignored .e.g. 'A1' in the "
         "first and 'a1' in the second."),
        (["1 ", " 2", "3"], ["1", "2", "4"], "would share 2 if surrounding spaces were ignored .e.g. '1 ' in"),
        (["007", "008", "9"], ["7", "8", "10"], "would share 2 if leading zeros were ignored .e.g. '007' in the"),
        (["p", "q", "r"], ["s", "t", "u"], "must describe the same people.$"),
    ],
)  # fmt: skip
def test_csv_files_that_share_no_id_say_why_when_one_way_of_writing_them_differs(tmp_path, alice_ids, bob_ids, why):
    alice = write_csv(tmp_path / "a.csv", ["id", "x", "label"], [(i, k, k % 2) for k, i in enumerate(alice_ids)])
    bob = write_csv(tmp_path / "b.csv", ["id", "z"], [(i, k) for k, i in enumerate(bob_ids)])
    with pytest.raises(VCLInputError, match="share no value of 'id'; they " + why):
        TabularDataModule("csv", csv_files=[alice, bob], task="classification").setup()


@pytest.mark.parametrize("fmt", ["csv", "int64", "float64", "category"])
def test_classes_are_the_labels_sorted_as_text_whatever_their_type(tmp_path, fmt):
    """Classes are the labels as the file spells them, sorted as text, from a CSV file (read as text) or a Parquet
    column of integers, floats or categories (a dictionary whose unused entries are no class)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    labels = [2, 10, 2, 1, 10, 2] if fmt != "category" else ["b", "a", "b", "c", "a", "b"]
    rows = [(i, i, v) for i, v in enumerate(labels)][::-1]
    if fmt == "csv":
        alice = write_csv(tmp_path / "a.csv", ["id", "x", "label"], rows)
    else:
        label = pa.array([v for _, _, v in rows], pa.string() if fmt == "category" else fmt)
        if fmt == "category":  # a dictionary with an entry ("unused") that no row holds
            label = pa.DictionaryArray.from_arrays(
                pa.array([["a", "b", "c"].index(v) for v in label.to_pylist()], pa.int32()), ["a", "b", "c", "unused"]
            )
        alice = tmp_path / "a.parquet"
        pq.write_table(pa.table({"id": [str(i) for i, _, _ in rows], "x": [float(x) for _, x, _ in rows],
                                 "label": label}), alice)  # fmt: skip
    bob = write_csv(tmp_path / "b.csv", ["id", "z"], [(i, -i) for i in range(len(labels))])
    table = load_csv_organizations([alice, bob], task="classification")
    names = sorted({str(v) for v in labels})  # a float label 2.0 is the class "2", as Arrow writes it
    assert table.classes == names and table.num_classes == 3
    assert table.y.tolist() == [names.index(str(v)) for v in labels]  # the aligned rows: IDs sorted


def test_csv_missing_id_and_label_columns(tmp_path):
    alice = write_csv(tmp_path / "a.csv", ["key", "x", "label"], [(1, 1, 0)])
    bob = write_csv(tmp_path / "b.csv", ["id", "z"], [(1, 1)])
    with pytest.raises(VCLInputError, match="no ID column 'id'"):
        TabularDataModule("csv", csv_files=[alice, bob], task="classification").setup()
    alice = write_csv(tmp_path / "a.csv", ["id", "x"], [(1, 1)])
    with pytest.raises(VCLInputError, match="no label column 'label'"):
        TabularDataModule("csv", csv_files=[alice, bob], task="classification").setup()
    only_id = write_csv(tmp_path / "c.csv", ["id"], [(1,)])
    alice = write_csv(tmp_path / "a.csv", ["id", "x", "label"], [(1, 1, 0)])
    with pytest.raises(VCLInputError, match="no feature columns"):
        TabularDataModule("csv", csv_files=[alice, only_id], task="classification").setup()


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"dataset": "mnist_tabular"}, "data.dataset='mnist_tabular' is unknown"),
        ({"dataset": "iris", "organizations": 5}, "exceeds the 4 features"),
        ({"dataset": "wine", "assignment": {"alice": ["alcohol"], "bob": []}}, "no columns"),
        ({"dataset": "wine", "assignment": {"alice": ["colour"]}}, "unknown column 'colour'"),
    ],
)
def test_bad_dataset_settings(kwargs, message):
    with pytest.raises(VCLInputError, match=message):
        TabularDataModule(**kwargs).setup()


def test_dataloaders_serve_one_organization_or_all():
    dm = TabularDataModule("iris", organizations=2)
    x, y = next(iter(dm.dataloader("train", organization=1)))
    assert x.shape[1] == 2 and y.dtype == torch.int64
    x, _ = next(iter(dm.train_dataloader()))
    assert x.shape[1] == 4


BANK_LEVELS = {
    "job": ["admin.", "blue-collar", "entrepreneur", "housemaid", "management", "retired", "self-employed",
            "services", "student", "technician", "unemployed", "unknown"],
    "marital": ["divorced", "married", "single"],
    "education": ["primary", "secondary", "tertiary", "unknown"],
    "default": ["no", "yes"],
    "housing": ["no", "yes"],
    "loan": ["no", "yes"],
    "contact": ["cellular", "telephone", "unknown"],
    "month": ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
    "poutcome": ["failure", "other", "success", "unknown"],
}  # fmt: skip
BANK_HEADER = ["age", "job", "marital", "education", "default", "balance", "housing", "loan", "contact", "day",
               "month", "duration", "campaign", "pdays", "previous", "poutcome", "y"]  # fmt: skip


def write_bank_full(path, n=60, seed=0):
    """A small file in UCI's bank-full.csv format: ';'-separated, quoted header and strings."""
    rng = np.random.RandomState(seed)
    lines = [";".join(f'"{h}"' for h in BANK_HEADER)]
    for i in range(n):
        row = []
        for h in BANK_HEADER:
            if h in BANK_LEVELS:
                row.append(f'"{BANK_LEVELS[h][i % len(BANK_LEVELS[h])]}"')
            elif h == "y":
                row.append('"yes"' if i % 7 == 0 else '"no"')
            else:
                row.append(str(int(rng.randint(-5, 3000))))
        lines.append(";".join(row))
    path.write_text("\n".join(lines) + "\n")


def test_bank_marketing_reads_uci_format_one_hot_and_splits_whole_attributes(tmp_path):
    from vcl.datamodules import OverlapDataModule
    from vcl.datamodules.sources import load_table

    with pytest.raises(VCLInputError, match="bank-full.csv under data.root"):
        load_table("bank_marketing", root=str(tmp_path))
    write_bank_full(tmp_path / "bank-full.csv")
    table = load_table("bank_marketing", root=str(tmp_path))
    assert table.X.shape == (60, 48) and len(set(table.attributes)) == 16  # the paper's 48 features
    assert table.num_classes == 2 and table.y.sum() == 9  # 'yes' (every 7th row) is class 1
    for attribute, levels in BANK_LEVELS.items():
        cols = [j for j, a in enumerate(table.attributes) if a == attribute]
        expected = table.X[:, cols].sum(1) if len(levels) > 2 else np.ones(60)
        assert len(cols) == (len(levels) if len(levels) > 2 else 1) and (expected == 1).all()
    assert "housing=yes" in table.columns and "job=admin." in table.columns

    def owners(columns):
        return [{table.attributes[table.columns.index(c)] for c in cols} for cols in columns]

    dm = TabularDataModule("bank_marketing", organizations=4, root=str(tmp_path))
    dm.setup()
    held = owners([v.columns for v in dm.data.views])
    assert sum(len(h) for h in held) == 16 and len(set().union(*held)) == 16  # each attribute at one organization
    overlap = OverlapDataModule("bank_marketing", gamma=0.4, test_fraction=0.1, root=str(tmp_path))
    overlap.setup()
    a, b = owners([overlap.data.a.columns, overlap.data.b.columns])
    assert not a & b and len(a | b) == 16 and overlap.data.a.num_features + overlap.data.b.num_features == 48


# --- each CSV party's own preparation: text categories and missing values --------------------------
def messy_files(folder, n=40):
    """Alice: a number with gaps, the label; Bob: a text column with gaps (a colour seen only in row p39) and a
    number. Returns the two paths and the rows as written."""
    rng = np.random.RandomState(1)
    colours = ["red", "green", "blue"]
    alice_rows, bob_rows = [], []
    for i in range(n):
        x = "" if i % 9 == 4 else f"{rng.randn():.4f}"
        colour = "violet" if i == n - 1 else ("" if i % 7 == 3 else colours[i % 3])
        alice_rows.append((f"p{i:02d}", x, i % 2))
        bob_rows.append((f"p{i:02d}", colour, f"{rng.randn():.4f}"))
    alice = write_csv(folder / "alice.csv", ["id", "x", "label"], alice_rows)
    bob = write_csv(folder / "bob.csv", ["id", "colour", "z"], bob_rows)
    return [alice, bob], alice_rows, bob_rows


def test_text_categories_and_missing_values_are_refused_by_default_naming_the_fix(tmp_path):
    files, _, _ = messy_files(tmp_path)
    with pytest.raises(VCLInputError, match=r"alice\.csv, column 'x', ID 'p04' is missing .* set data.missing: drop"):
        TabularDataModule("csv", csv_files=files, task="classification").setup()
    with pytest.raises(VCLInputError, match=r"bob\.csv, column 'colour', ID 'p00': 'red' is not a number.*onehot"):
        TabularDataModule("csv", csv_files=files, task="classification", missing=["impute", "error"]).setup()


def test_onehot_and_impute_are_fitted_on_each_partys_own_training_rows(tmp_path):
    files, alice_rows, bob_rows = messy_files(tmp_path)
    dm = TabularDataModule(
        "csv", csv_files=files, task="classification", test_fraction=0.25, categorical=["onehot"], missing=["impute"]
    )
    dm.setup()
    alice, bob = dm.data.views
    colours = {f"colour={c}" for c in ("red", "green", "blue", "violet")}
    assert alice.columns == ["x"] and bob.columns[0] == "z" and set(bob.columns[1:]) <= colours
    rows = dm.row_splits(len(alice_rows))
    train_ids = {alice_rows[i][0] for i in rows["train"]}
    # the encoder saw the training rows only: violet (one test row) has no column, and encodes as zeros
    assert ("p39" in train_ids) == ("colour=violet" in bob.columns)
    # a missing number gets its party's training mean: after z-scoring with training statistics, exactly 0
    for split, idx in rows.items():
        for pos, i in enumerate(idx):
            if alice_rows[i][1] == "":
                assert float(alice.splits[split][pos, 0]) == pytest.approx(0.0, abs=1e-6)
    # one-hot columns hold two values each (z-scored 0/1), one 1 per row where the colour was known in training
    train = bob.splits["train"][:, 1:]
    assert all(len(torch.unique(train[:, j])) == 2 for j in range(train.shape[1]))


def test_drop_removes_a_partys_incomplete_rows_from_every_party_before_the_split(tmp_path):
    files, alice_rows, bob_rows = messy_files(tmp_path)
    dm = TabularDataModule(
        "csv", csv_files=files, task="classification", categorical=["onehot"], missing=["impute", "drop"]
    )
    dm.setup()
    kept = set(dm.data.ids.to_pylist())
    bob_gaps = {r[0] for r in bob_rows if r[1] == ""}
    assert kept == {r[0] for r in alice_rows} - bob_gaps  # Bob drops his incomplete rows; Alice imputes hers
    n = sum(v.shape[0] for v in dm.data.views[0].splits.values())
    assert n == sum(v.shape[0] for v in dm.data.views[1].splits.values()) == len(kept)


def test_a_party_alone_prepares_its_file_as_the_whole_table_does(tmp_path):
    """Where parties run apart each reads its own file on the shared IDs (drop: each offers only its complete
    rows): the same views as one process reading every file."""
    from vcl.datamodules.csv_files import csv_ids, shared_ids

    files, _, _ = messy_files(tmp_path)
    policy = dict(task="classification", categorical=["onehot"], missing=["impute", "drop"])
    whole = TabularDataModule("csv", csv_files=files, **policy)
    whole.setup()
    ids = shared_ids([csv_ids(files[0]), csv_ids(files[1], drop_incomplete=True)])
    for k, view in enumerate(whole.data.views):
        alone = TabularDataModule("csv", csv_files=files, only=k, ids=ids, **policy)
        alone.setup()
        mine = alone.data.views[0]
        assert mine.columns == view.columns
        # equal up to the rounding of a column mean summed over another memory layout (~1e-17 here)
        assert all(torch.allclose(mine.splits[s], view.splits[s], atol=1e-6, rtol=0) for s in view.splits)


def test_every_dataset_of_the_registry_has_its_reader_and_no_reader_is_unlisted():
    """The registry's dataset table is the one list: each table has its loader, each image set its source."""
    from vcl.datamodules import image, sources

    from vcl.registry import DATASETS, datasets_of

    loaders = {
        *sources.SKLEARN,
        *sources.SYNTHETIC,
        "blob",
        "boston",
        "csv",
        "digits_halves",
        "dc_artificial",
        "fashion_mnist_halves",
    }
    assert set(datasets_of("table")) == loaders | {"bank_marketing"}
    assert set(datasets_of("image")) == {*image.TORCHVISION, "mnist_subset", "digits_image"}
    assert set(DATASETS.values()) == {"table", "image", "sequence"}


def test_parquet_files_give_the_views_csv_files_give(tmp_path):
    """The same rows as Parquet (typed columns: integer IDs, numeric labels) and as CSV: the same aligned views."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.RandomState(3)
    n = 40
    x, z = rng.randn(n, 2), rng.randn(n)
    label = (x[:, 0] + z > 0).astype(np.int64)
    order = rng.permutation(n)
    alice = write_csv(tmp_path / "alice.csv", ["id", "x0", "x1", "label"],
                      [(i, x[i, 0], x[i, 1], label[i]) for i in range(n)])  # fmt: skip
    bob = write_csv(tmp_path / "bob.csv", ["id", "z"], [(i, z[i]) for i in order])
    pq.write_table(pa.table({"id": np.arange(n), "x0": x[:, 0], "x1": x[:, 1], "label": label}),
                   tmp_path / "alice.parquet")  # fmt: skip
    pq.write_table(pa.table({"id": order, "z": z[order]}), tmp_path / "bob.parquet")
    views = {}
    for kind, files in (("csv", [alice, bob]), ("parquet", [tmp_path / "alice.parquet", tmp_path / "bob.parquet"])):
        dm = TabularDataModule("csv", csv_files=[str(f) for f in files], task="classification")
        dm.setup()
        views[kind] = dm.data
    assert views["csv"].ids == views["parquet"].ids
    for a, b in zip(views["csv"].views, views["parquet"].views, strict=True):
        assert a.columns == b.columns and all(torch.allclose(a.splits[s], b.splits[s]) for s in a.splits)
    assert all(torch.equal(views["csv"].labels[s], views["parquet"].labels[s]) for s in views["csv"].labels)


def test_a_parquet_files_columns_are_read_after_its_ids_from_the_same_file(tmp_path):
    """A Parquet file's IDs are read alone (the rows align before any file's columns are held), its columns when
    first asked for; a file rewritten in between is refused, and an empty column is still named as the columns are
    read (once the rows are aligned)."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq
    from vcl.datamodules.csv_files import load_csv_organizations
    from vcl.datamodules.reading import column_of, read_file

    path = tmp_path / "bob.parquet"
    pq.write_table(pa.table({"id": ["b", "a", "c"], "z": [2.0, 1.0, 3.0]}), path)
    own = read_file(path)
    assert own.table is None and own.header == ["z"] and own.ids.to_pylist() == ["b", "a", "c"]
    assert column_of(own, "z").to_pylist() == [2.0, 1.0, 3.0] and own.table is not None
    stale = read_file(path)
    pq.write_table(pa.table({"id": ["b", "a", "c"], "z": [9.0, 9.0, 9.0]}), path)
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
    with pytest.raises(VCLInputError, match="bob.parquet changed while it was read; run again"):
        column_of(stale, "z")
    alice = write_csv(tmp_path / "alice.csv", ["id", "x", "label"], [(k, i, i % 2) for i, k in enumerate("abc")])
    pq.write_table(pa.table({"id": ["b", "a", "c"], "z": pa.nulls(3, pa.float64())}), path)
    with pytest.raises(VCLInputError, match="bob.parquet, column 'z' has no value in any row"):
        load_csv_organizations([alice, path], task="classification")


@pytest.mark.parametrize("last", ["", "7.5"])
def test_a_column_empty_but_in_its_last_row_is_not_empty(tmp_path, last):
    """A column's first rows are looked at first (a value there settles it); one empty in all of them but with a
    value further on is read, one empty in every row refused."""
    n = 5000  # beyond the first rows looked at
    alice = write_csv(tmp_path / "a.csv", ["id", "x", "label"], [(i, i, i % 2) for i in range(n)])
    bob = write_csv(tmp_path / "b.csv", ["id", "z"], [(i, last if i == n - 1 else "") for i in range(n)])
    options = {"task": "classification", "missing": ["error", "impute"]}
    if not last:
        with pytest.raises(VCLInputError, match="b.csv, column 'z' has no value in any row"):
            load_csv_organizations([alice, bob], **options)
    else:
        assert load_csv_organizations([alice, bob], **options).raw_columns[1] == ["z"]


def test_a_file_reads_as_float32_each_check_naming_the_first_offending_id_in_row_order(tmp_path):
    """The features are held once, as float32; a bad cell is named by its file, column and the first ID (in the
    aligned, sorted order) that holds one, quoting the cell as the file spells it."""
    from vcl.datamodules.csv_files import load_csv_organizations

    n = 30
    alice = write_csv(tmp_path / "a.csv", ["id", "x", "label"], [(f"k{i:02d}", i * 0.5, i % 3) for i in range(n)])
    bob = write_csv(tmp_path / "b.csv", ["id", "z"], [(f"k{i:02d}", -i) for i in reversed(range(n))])
    table = load_csv_organizations([alice, bob], task="classification")
    assert (
        table.matrix().dtype == np.float32
        and table.matrix().shape == (n, 2)
        and table.ids[:2].to_pylist() == ["k00", "k01"]
    )
    assert np.array_equal(table.matrix()[:, 1], -np.arange(n, dtype=np.float32)) and table.num_classes == 3
    cells = {"k17": "3e39", "k05": "-Infinity", "k09": "oops"}
    rows = [(f"k{i:02d}", cells.get(f"k{i:02d}", -i)) for i in reversed(range(n))]
    write_csv(bob, ["id", "z"], [r for r in rows if r[1] != "oops"])
    with pytest.raises(VCLInputError, match=r"b\.csv, column 'z', ID 'k05': '-Infinity' is infinite"):
        load_csv_organizations([alice, bob], task="classification")
    write_csv(bob, ["id", "z"], [r for r in rows if r[1] != "-Infinity"])
    with pytest.raises(VCLInputError, match=r"b\.csv, column 'z', ID 'k09': 'oops' is not a number"):
        load_csv_organizations([alice, bob], task="classification")
    write_csv(bob, ["id", "z"], [r for r in rows if r[1] not in ("-Infinity", "oops")])
    with pytest.raises(VCLInputError, match=r"column 'z', ID 'k17': '3e39' is beyond float32's range"):
        load_csv_organizations([alice, bob], task="classification", missing=["drop"])
    write_csv(bob, ["id", "z"], [(f"k{i:02d}", -i) for i in range(n)] + [("k03", 1)])
    with pytest.raises(VCLInputError, match=r"b\.csv repeats ID 'k03'"):
        load_csv_organizations([alice, bob], task="classification")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_scaling_a_block_column_by_column_gives_the_whole_blocks_float64_result_bit_for_bit(dtype, order):
    from vcl.datamodules.prepare import Preparation

    rng = np.random.default_rng(0)
    block = np.asarray(rng.normal(3.0, 7.0, size=(1000, 5)) ** 3, dtype=dtype, order=order)
    prep = Preparation([f"c{j}" for j in range(5)], ["numeric"] * 5)
    prep.mean, prep.std = block.astype(np.float64).mean(0), block.astype(np.float64).std(0)
    scaled = prep.scale(block)
    assert scaled.dtype == np.float32 and scaled.flags.c_contiguous
    assert np.array_equal(scaled, ((block - prep.mean) / prep.std).astype(np.float32))


def test_a_preparation_writes_into_a_float32_slice_what_it_returns_as_float64():
    """Preparation.encode(out=...) (how a table's groups are encoded into their places) casts each part as it
    writes it: the numbers equal the float64 encoding cast to float32, text columns one-hot and imputed."""
    from vcl.datamodules.prepare import prepare_group

    rng = np.random.default_rng(0)
    numbers = rng.normal(size=(50, 2))
    numbers[::7, 0] = np.nan
    colors = np.array(["red", "blue", "green"], dtype=object)[rng.integers(0, 3, 50)]
    colors[::5] = np.nan
    block = np.column_stack([numbers[:, 0], colors, numbers[:, 1]]).astype(object)
    kinds, names = ["numeric", "categorical", "numeric"], ["a", "color", "b"]
    block[:, 1] = np.nan
    text = {1: colors}
    columns, fitted = prepare_group(block, kinds, names, "impute", np.arange(40), text)
    assert columns == ["a", "b", "color=blue", "color=green", "color=red"] and fitted.width == 5
    whole = fitted.encode(block, text)
    table = np.full((50, 9), -1.0, dtype=np.float32, order="F")
    fitted.encode(block, text, out=table[:, 2:7])
    assert np.array_equal(table[:, 2:7], whole.astype(np.float32)) and (table[:, [0, 1, 7, 8]] == -1).all()
    assert not np.isnan(whole).any() and (whole[:, 2:].sum(1) == 1).all()


def test_a_kept_preparation_encodes_as_scikit_learns_fitted_imputers_and_encoder_and_survives_a_checkpoint(tmp_path):
    """What a party keeps (Preparation.state) is data: saved in a checkpoint and read back with weights_only, it
    encodes new rows (empty cells, a category unseen in training, ties for the most frequent one) exactly as the
    scikit-learn imputers and encoder fitted on the training rows do."""
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import OneHotEncoder
    from vcl.datamodules.prepare import Preparation, prepare_group

    from vcl.storage.checkpoints import PARTY_KEYS, atomic_torch_save, load_checkpoint

    rng = np.random.default_rng(1)
    n, train = 80, np.arange(60)
    numbers = rng.normal(size=(n, 2))
    numbers[rng.random((n, 2)) < 0.2] = np.nan
    colors = np.array(["red", "blue", "green", "grey"], dtype=object)[rng.integers(0, 3, n)]  # grey: unseen in training
    colors[60:] = np.array(["grey", "red", "blue"] * 7, dtype=object)[:20]
    colors[train[:30]] = np.array(["blue", "red"] * 15, dtype=object)  # a tie decided as scikit-learn decides it
    colors[rng.random(n) < 0.15] = np.nan
    block = np.column_stack([numbers[:, 0], np.full(n, np.nan), numbers[:, 1]])
    kinds, names = ["numeric", "categorical", "numeric"], ["a", "color", "b"]
    _, fitted = prepare_group(block, kinds, names, "impute", train, {1: colors})
    fitted.mean, fitted.std, fitted.read = np.arange(5.0), np.arange(1.0, 6.0), ["a", "colour", "b"]
    atomic_torch_save(
        {"state": {}, "party": "x", "round": 1, "run": "r", "preparation": [fitted.state()]}, tmp_path / "c"
    )
    kept = Preparation.from_state(load_checkpoint(tmp_path / "c", PARTY_KEYS)["preparation"][0], "here")
    assert (
        kept.columns == fitted.columns == ["a", "b", "color=blue", "color=green", "color=red"]
        and kept.read[1] == "colour"
    )

    imputer = SimpleImputer(strategy="mean").fit(block[train][:, [0, 2]])  # as laid out there: the same sums
    fill = SimpleImputer(strategy="most_frequent", missing_values=np.nan).fit(colors[train].reshape(-1, 1))
    filled = fill.transform(colors.reshape(-1, 1))
    onehot = OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(filled[train])
    expected = np.hstack([imputer.transform(block[:, [0, 2]]), onehot.transform(filled)])
    assert np.array_equal(kept.encode(block, {1: colors}), expected)
    assert (expected[colors == "grey", 2:] == 0).all() and fill.statistics_[0] == kept.fills[1]
    tied = np.array(["b", "a", "é", "Z", "é", "Z", "a", "b", np.nan], dtype=object)  # four ways, in code-point order
    _, prep = prepare_group(np.full((9, 1), np.nan), ["categorical"], ["t"], "impute", np.arange(9), {0: tied})
    fill = SimpleImputer(strategy="most_frequent", missing_values=np.nan).fit(tied.reshape(-1, 1))
    onehot = OneHotEncoder(sparse_output=False).fit(fill.transform(tied.reshape(-1, 1)))
    assert prep.fills[0] == fill.statistics_[0] == "Z" and prep.categories[0] == onehot.categories_[0].tolist()


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: s.update(kinds=["numeric", "code", "numeric"]),
        lambda s: s.update(categories=[[1, ["red", "blue"]]]),  # not sorted
        lambda s: s.update(means=torch.tensor([1.0, float("nan")], dtype=torch.float64)),
        lambda s: s.update(std=torch.zeros(5, dtype=torch.float64)),
        lambda s: s.update(mean=[0.0] * 5),
        lambda s: s.update(place=-1),
        lambda s: s.pop("read"),
        lambda s: s.update(fills=[[0, "x"]]),  # a numeric column's
    ],
)
def test_a_damaged_or_crafted_preparation_is_one_sentence(damage):
    from vcl.datamodules.prepare import Preparation, prepare_group

    colors = np.array(["red", "blue", "green"] * 4, dtype=object)
    block = np.column_stack([np.arange(12.0), np.full(12, np.nan), np.arange(12.0) ** 2])
    _, fitted = prepare_group(block, ["numeric", "categorical", "numeric"], ["a", "c", "b"], "impute", np.arange(9),
                              {1: colors})  # fmt: skip
    fitted.mean, fitted.std, fitted.read = np.zeros(5), np.ones(5), ["a", "c", "b"]
    state = fitted.state()
    assert Preparation.from_state(state, "here").width == 5
    damage(state)
    with pytest.raises(VCLInputError, match=r"^here keeps no organization's preparation that vcl can use \(.+\); "):
        Preparation.from_state(state, "here")


def test_strings_of_one_width_sort_as_arrow_sorts_them():
    """sorted_strings gives Arrow's order (stable, byte by byte) for strings of one width: UUIDs, zero-padded
    numbers, multi-byte characters, repeats, a sliced array, and strings alike in more first positions than one
    64-bit word holds (their order settled by the later ones); strings of several widths, or nulls, are not its."""
    import uuid

    import pyarrow as pa
    import pyarrow.compute as pc
    from vcl.datamodules.ids import sorted_strings

    rng = np.random.default_rng(3)
    letters = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    heads = ["".join(rng.choice(letters, 12)) for _ in range(1000)]
    cases = [
        [str(uuid.UUID(bytes=rng.bytes(16))) for _ in range(3000)],
        [f"c{i:09d}" for i in rng.permutation(5000)],
        [f"é{i:011d}" for i in rng.permutation(2000)],
        [h + "".join(rng.choice(letters, 8)) for h in heads for _ in range(2)],  # pairs alike in 12 first letters
        ["ab", "aa", "ab", "aa", "ab"],
        ["x"],
    ]
    for strings in cases:
        for array in (pa.array(strings, pa.string()), pa.array(["pad", *strings], pa.string()).slice(1)):
            order, ordered = sorted_strings(array)
            expected = pc.sort_indices(array).to_numpy()
            assert order.tolist() == expected.tolist()
            assert ordered.to_pylist() == array.take(expected).to_pylist()
    assert sorted_strings(pa.array(["a", "bb"])) is None
    assert sorted_strings(pa.array(["a", None])) is None


def test_ids_of_one_width_encode_through_integer_keys_as_arrow_encodes_their_text(monkeypatch):
    """encode_ids of IDs all of one width (up to 8 bytes: the bytes are the key; beyond: a hash of the words) gives
    the codes and distinct IDs of Arrow's own encoding of the text, sliced arrays and multi-byte characters included;
    IDs of several widths, and two IDs that meet on one key, are encoded as text."""
    import uuid

    import pyarrow as pa
    from vcl.datamodules import ids as fixed
    from vcl.datamodules.csv_files import encode_ids

    def arrow(lists):
        chunks = pa.chunked_array([pa.array(a, pa.string()) for a in lists]).dictionary_encode().chunks
        return chunks[0].dictionary.to_pylist(), [c.indices.to_numpy().tolist() for c in chunks]

    rng = np.random.default_rng(0)
    people = {
        3: [f"{i:03d}" for i in range(400)],
        8: [f"c{i:07d}" for i in range(400)],
        10: [f"c{i:09d}" for i in range(400)],
        36: [str(uuid.UUID(int=int(rng.integers(2**62)) << 64 | i)) for i in range(400)],
        13: [f"é{i:011d}" for i in range(400)],  # 13 bytes: é is two
    }
    for width, names in people.items():
        lists = [list(rng.choice(names, size=n, replace=False)) for n in (300, 250, 390)]
        sliced = pa.array(["pad", *lists[1]], pa.string()).slice(1)  # an array that starts inside its buffers
        encoding = fixed.fixed_width_encoding([pa.array(lists[0], pa.string()), sliced, pa.array(lists[2])])
        assert encoding is not None, width
        dictionary, codes = encode_ids(lists)
        assert (dictionary.to_pylist(), [c.tolist() for c in codes]) == arrow(lists)
        assert (encoding[0].to_pylist(), [c.tolist() for c in encoding[1]]) == arrow(lists)
    assert fixed.fixed_width_encoding([pa.array(["a1", "b2"]), pa.array(["c33"])]) is None  # several widths
    monkeypatch.setattr(fixed, "_keys", lambda rows: rows[:, 0].astype(np.uint64))  # many IDs, one key
    lists = [people[10][:50], people[10][25:90]]
    assert fixed.fixed_width_encoding([pa.array(a) for a in lists]) is None
    dictionary, codes = encode_ids(lists)  # as text
    assert (dictionary.to_pylist(), [c.tolist() for c in codes]) == arrow(lists)
