"""Tabular data sources: scikit-learn's datasets, GAL's blob, Boston housing, the DC paper's artificial
problem, and CSV per organization.

Each source gives a :class:`Table`: aligned rows ``X`` (n × d), labels ``y``, column names, the task
kind, and — for CSV data — the column groups the files define (one organization per file). A generated
source may fix its own test rows (``test_rows``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vcl.errors import VCLInputError

SKLEARN = {
    "wine": ("load_wine", "classification"),
    "iris": ("load_iris", "classification"),
    "breast_cancer": ("load_breast_cancer", "classification"),
    "diabetes": ("load_diabetes", "regression"),
    "digits": ("load_digits", "classification"),
}
DATASETS = (*SKLEARN, "blob", "boston", "dc_artificial", "csv")


@dataclass
class Table:
    X: np.ndarray
    y: np.ndarray
    columns: list[str]
    task: str  # classification | regression
    num_classes: int = 1
    groups: list[list[int]] | None = None  # column indices per organization (CSV files)
    group_names: list[str] | None = None
    ids: list[str] | None = None
    test_rows: np.ndarray | None = None  # row indices the source reserves for test (generated data)


def load_table(dataset: str, csv_files=(), id_column="id", label_column="label", task=None, seed: int = 0) -> Table:
    """``seed`` draws the generated datasets (dc_artificial); the fixed ones ignore it."""
    if dataset in SKLEARN:
        import sklearn.datasets

        loader, kind = SKLEARN[dataset]
        bunch = getattr(sklearn.datasets, loader)()
        names = [str(c) for c in getattr(bunch, "feature_names", [f"x{i}" for i in range(bunch.data.shape[1])])]
        return _finish(bunch.data, bunch.target, names, kind)
    if dataset == "blob":  # GAL Table 7: 100 samples, 10 features, 10 classes
        from sklearn.datasets import make_blobs

        X, y = make_blobs(n_samples=100, n_features=10, centers=10, random_state=0)
        return _finish(X, y, [f"x{i}" for i in range(10)], "classification")
    if dataset == "boston":
        from mlxtend.data import boston_housing_data

        X, y = boston_housing_data()
        names = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT"]
        return _finish(X, y, names, "regression")
    if dataset == "dc_artificial":
        return dc_artificial(seed)
    if dataset == "csv":
        return load_csv_organizations(csv_files, id_column, label_column, task)
    raise VCLInputError(f"dataset={dataset!r} is unknown; use one of {', '.join(DATASETS)}.")


def dc_artificial(seed: int = 0, n_train: int = 1100, n_test: int = 1000, noise: float = 0.5) -> Table:
    """The DC paper's 20-dimensional two-class problem (Section 4.2): features 1–3 essential, 17 noise.

    Features 1–3 are the corners ``s ∈ {−1, 1}³`` of a cube plus N(0, 0.25²) jitter and the class is the
    majority sign of ``s`` — separable by five axis-aligned splits, as the paper's 5-split tree needs;
    a party that sees only features {1, 3} or {2} is right 3/4 of the time (the paper's Local 0.75).
    Features 4–20 are N(0, ``noise``²). The last ``n_test`` rows are the test rows; the DC datamodule
    takes the public rows X_pub from the first ``n_train`` (1,000 train + 100 public by default).
    """
    rng = np.random.RandomState(seed)
    n = n_train + n_test
    corners = rng.choice([-1.0, 1.0], size=(n, 3))
    X = np.hstack([corners + 0.25 * rng.randn(n, 3), noise * rng.randn(n, 17)])
    y = (corners.sum(1) > 0).astype(np.int64)
    table = _finish(X, y, [f"x{i}" for i in range(1, 21)], "classification")
    table.test_rows = np.arange(n_train, n)
    return table


def _finish(X, y, names, kind) -> Table:
    y = np.asarray(y)
    if kind == "classification":
        classes, y = np.unique(y, return_inverse=True)
        return Table(np.asarray(X, dtype=np.float64), y.astype(np.int64), names, kind, len(classes))
    return Table(np.asarray(X, dtype=np.float64), y.astype(np.float64).reshape(-1, 1), names, kind, 1)


def _read_csv(path: Path, id_column: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    if not path.is_file():
        raise VCLInputError(f"csv file {path} does not exist; check the path in csv_files.")
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        header = list(reader.fieldnames or [])
        if id_column not in header:
            raise VCLInputError(f"csv file {path} has no ID column {id_column!r}; add it or set id_column to its name.")
        rows: dict[str, dict[str, str]] = {}
        for row in reader:
            key = row[id_column]
            if key in (None, ""):
                raise VCLInputError(f"csv file {path} has a row with a missing {id_column!r}; fill in every ID.")
            if key in rows:
                raise VCLInputError(f"csv file {path} repeats ID {key!r}; each ID must appear once per file.")
            rows[key] = row
    return [c for c in header if c != id_column], rows


def _number(value: str | None, path: Path, column: str, key: str) -> float:
    try:
        x = float(value) if value not in (None, "") else math.nan
    except ValueError:
        raise VCLInputError(
            f"csv file {path}, column {column!r}, ID {key!r}: {value!r} is not a number; features must be numeric."
        ) from None
    if not math.isfinite(x):
        raise VCLInputError(
            f"csv file {path}, column {column!r}, ID {key!r} is missing or NaN; impute or drop that row first."
        )
    return x


def load_csv_organizations(files, id_column="id", label_column="label", task=None) -> Table:
    """One CSV per organization, inner-joined on ``id_column``; the first file (Alice's) holds the label."""
    paths = [Path(f) for f in files]
    if len(paths) < 1:
        raise VCLInputError("dataset=csv needs csv_files: one CSV per organization, Alice's (with the label) first.")
    if task not in ("classification", "regression"):
        raise VCLInputError(f"dataset=csv needs task=classification or task=regression (got {task!r}).")
    tables = [_read_csv(p, id_column) for p in paths]
    if label_column not in tables[0][0]:
        raise VCLInputError(
            f"Alice's file {paths[0]} has no label column {label_column!r}; add it or set label_column."
        )
    for p, (header, _) in zip(paths[1:], tables[1:], strict=True):
        if label_column in header:
            raise VCLInputError(f"csv file {p} also holds the label {label_column!r}; only Alice's (first) file may.")
    shared = set(tables[0][1])
    for _, rows in tables[1:]:
        shared &= set(rows)
    if not shared:
        raise VCLInputError(f"the csv files share no value of {id_column!r}; they must describe the same people.")
    ids = sorted(shared)
    columns, groups, blocks, seen = [], [], [], set()
    for p, (header, rows) in zip(paths, tables, strict=True):
        feats = [c for c in header if c != label_column]
        if not feats:
            raise VCLInputError(f"csv file {p} has no feature columns; every organization needs at least one.")
        groups.append(list(range(len(columns), len(columns) + len(feats))))
        for c in feats:
            name = f"{p.stem}.{c}" if c in seen else c
            seen.add(c)
            columns.append(name)
        blocks.append(np.array([[_number(rows[k][c], p, c, k) for c in feats] for k in ids], dtype=np.float64))
    raw_labels = [tables[0][1][k][label_column] for k in ids]
    if any(v in (None, "") for v in raw_labels):
        raise VCLInputError(f"Alice's file {paths[0]} has empty labels in {label_column!r}; fill them in.")
    if task == "regression":
        y = np.array([_number(v, paths[0], label_column, k) for v, k in zip(raw_labels, ids, strict=True)])
        table = _finish(np.hstack(blocks), y, columns, task)
    else:
        numeric = [_maybe_float(v) for v in raw_labels]
        if all(v is not None for v in numeric) and any(v != int(v) for v in numeric):
            raise VCLInputError(
                f"label column {label_column!r} holds non-integer numbers but task=classification; "
                "use task=regression or class labels."
            )
        table = _finish(np.hstack(blocks), np.array(raw_labels), columns, task)
    table.groups, table.group_names, table.ids = groups, [p.stem for p in paths], ids
    return table


def _maybe_float(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None
