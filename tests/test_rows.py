"""A table's rows moved whole (vcl.datamodules.rows): the fill of a file's columns, a split's scaled rows and the
training rows' columns, each the same numbers as the column-by-column reference, across blocks of rows."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from vcl.datamodules import fill, rows

from tests.conftest import write_csv


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(rows, "BLOCK", 7)  # many blocks, a short last one


def test_whole_rows_move_as_the_column_by_column_reference(small_blocks):
    rng = np.random.default_rng(0)
    n, m = 50, 40
    aligned = rng.permutation(n)[:m]  # file row of each aligned row
    columns = [rng.normal(size=n).astype(np.float32) for _ in range(3)]
    nulls = pa.array(columns[1], mask=rng.random(n) < 0.3)  # an Arrow column whose nulls read as NaN
    out = np.full((m, 4), -1.0, dtype=np.float32)
    rows.scatter([columns[0], nulls, columns[2]], rows.places_of(aligned, n), out, [0, 2, 3])
    expected = np.column_stack([columns[0], np.full(n, np.nan), nulls.to_numpy(zero_copy_only=False), columns[2]])
    assert np.array_equal(out, expected[aligned].astype(np.float32), equal_nan=True)
    with pytest.raises(ValueError, match="C-order"):
        rows.scatter(columns, rows.places_of(aligned, n), np.asfortranarray(out[:, :3]), [0, 1, 2])

    mean, std = rng.normal(size=4), rng.random(4) + 0.5
    for order in ("C", "F"):
        block = np.asarray(rng.normal(3.0, 7.0, size=(m, 4)) ** 3, dtype=np.float32, order=order)
        for taken in (None, rng.permutation(m)[:30], rng.integers(0, m, 60)):  # all, a split, a bootstrap draw
            scaled = rows.scaled_rows(block, taken, mean, std)
            reference = ((block if taken is None else block[taken]) - mean) / std
            assert scaled.flags.c_contiguous and np.array_equal(scaled, reference.astype(np.float32))
        train = np.sort(rng.permutation(m)[:25])
        got = {j: v.copy() for j, v in rows.column_values(block, train, group=3)}  # each, as it comes
        assert sorted(got) == [0, 1, 2, 3] and all(np.array_equal(got[j], block[:, j][train]) for j in range(4))
        assert rows.all_finite(block)
        block[m - 1, 2] = np.inf
        assert not rows.all_finite(block)


def test_a_files_float32_columns_fill_row_by_row_as_they_fill_taken_column_by_column(tmp_path, monkeypatch):
    """The row-by-row fill (float32 columns nothing refuses) and the column-by-column one give the same table; a
    missing cell in a row no one else holds is not refused, and one in a shared row is, by its ID."""
    from vcl.datamodules.csv_files import load_csv_organizations

    rng = np.random.default_rng(1)
    n = 40
    ids = [f"p{i:02d}" for i in range(n)]
    write_csv(tmp_path / "alice.csv", ["id", "x", "label"], [(i, rng.normal(), k % 2) for k, i in enumerate(ids)])
    order = rng.permutation(n + 3)  # bob's rows in an order of his own, three of them his alone
    bob_ids = np.array(ids + ["q0", "q1", "q2"])[order]
    z = pa.array(rng.normal(size=n + 3).astype(np.float32), mask=np.isin(bob_ids, ["p05", "q1"]))
    colour = pa.array(rng.choice(["red", "blue"], n + 3))
    pq.write_table(pa.table({"id": bob_ids, "z": z, "w": rng.normal(size=n + 3).astype(np.float32), "c": colour}),
                   tmp_path / "bob.parquet")  # fmt: skip
    files = [tmp_path / "alice.csv", tmp_path / "bob.parquet"]

    def load(**policy):
        return load_csv_organizations(files, task="classification", categorical=["onehot"], **policy)

    fast = load(missing=["impute"])
    monkeypatch.setattr(fill, "_plain", lambda *args: False)
    taken = load(missing=["impute"])
    assert fast.kinds == taken.kinds == ["numeric", "numeric", "numeric", "categorical"]
    assert np.array_equal(fast.matrix(), taken.matrix(), equal_nan=True) and np.isnan(fast.matrix()[5, 1])
    assert fast.text.keys() == taken.text.keys() and all(fast.text[j].equals(taken.text[j]) for j in fast.text)
    monkeypatch.undo()
    z = z.to_numpy(zero_copy_only=False)
    z[bob_ids == "p05"] = 1.0  # only q1, held by bob alone, misses its z
    pq.write_table(pa.table({"id": bob_ids, "z": pa.array(z, mask=bob_ids == "q1"), "c": colour}),
                   tmp_path / "bob.parquet")  # fmt: skip
    assert load().matrix().shape == (n, 3)
    z[bob_ids == "p07"] = np.nan
    pq.write_table(pa.table({"id": bob_ids, "z": z, "c": colour}), tmp_path / "bob.parquet")
    from vcl.errors import VCLInputError

    with pytest.raises(VCLInputError, match=r"bob\.parquet, column 'z', ID 'p07' is missing"):
        load()


@pytest.mark.parametrize("numeric", [1, 3])
def test_imputed_means_are_scikit_learns_to_the_last_bit(numeric):
    from sklearn.impute import SimpleImputer
    from vcl.datamodules.prepare import prepare_group

    rng = np.random.default_rng(numeric)
    block = (rng.normal(5.0, 3.0, size=(20000, numeric)) ** 3).astype(np.float32)
    block[rng.random(block.shape) < 0.1] = np.nan
    train = np.sort(rng.permutation(20000)[:15000])
    _, fitted = prepare_group(block, ["numeric"] * numeric, [f"c{j}" for j in range(numeric)], "impute", train)
    laid_out = np.asarray(block[train][:, list(range(numeric))], dtype=np.float64)  # as prepare_group lays them out
    imputer = SimpleImputer(strategy="mean").fit(laid_out)
    assert np.array_equal(fitted.means, imputer.statistics_)


def test_a_text_column_is_checked_and_encoded_once_a_distinct_string(tmp_path):
    """A text column is dictionary-encoded once: its checks run on its distinct strings, so a text cell in a row no
    one else holds does not make a numeric column text, and one in a shared row is named by its ID; its categories,
    spelled with spaces around them or missing ("", "nan"), are one-hot encoded as the strings themselves would be."""
    from vcl.datamodules.csv_files import load_csv_organizations
    from vcl.datamodules.prepare import prepare_group

    from vcl.errors import VCLInputError

    n = 30
    ids = [f"p{i:02d}" for i in range(n)]
    write_csv(tmp_path / "alice.csv", ["id", "x", "label"], [(i, k * 0.5, k % 2) for k, i in enumerate(ids)])
    spellings = [" red", "red ", "blue", "", "nan", "green"]
    colours = [spellings[k % len(spellings)] for k in range(n)]
    bob = [(i, c, k - 3.5) for k, (i, c) in enumerate(zip(ids, colours, strict=True))][::-1] + [("q0", "teal", "oops")]
    write_csv(tmp_path / "bob.csv", ["id", "colour", "z"], bob)
    files = [tmp_path / "alice.csv", tmp_path / "bob.csv"]
    table = load_csv_organizations(files, task="classification", categorical=["onehot"], missing=["impute"])
    assert table.kinds == ["numeric", "categorical", "numeric"]  # z: "oops" is only in q0, which alice lacks
    assert np.array_equal(table.matrix()[:, 2], np.arange(n) - 3.5) and np.isnan(table.matrix()[:, 1]).all()
    train = np.arange(n)
    _, coded = prepare_group(table.matrix()[:, 1:2], ["categorical"], ["colour"], "impute", train, {0: table.text[1]})
    plain = np.array([c.strip() if c.strip() not in ("", "nan") else np.nan for c in colours], dtype=object)
    _, reference = prepare_group(np.full((n, 1), np.nan), ["categorical"], ["colour"], "impute", train, {0: plain})
    assert coded.categories == reference.categories == {0: ["blue", "green", "red"]} and coded.fills == {0: "red"}
    assert np.array_equal(
        coded.encode(np.full((n, 1), np.nan), {0: table.text[1]}), reference.encode(np.full((n, 1), np.nan), {0: plain})
    )
    write_csv(tmp_path / "bob.csv", ["id", "z"], [(i, "oops" if i == "p07" else z) for i, _, z in bob])
    with pytest.raises(VCLInputError, match=r"bob\.csv, column 'z', ID 'p07': 'oops' is not a number"):
        load_csv_organizations(files, task="classification")
