"""A data source's table: aligned rows, labels, column names, task kind and the column groups that define the
organizations (:mod:`vcl.datamodules.sources`, :mod:`vcl.datamodules.csv_files`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcl.errors import VCLInputError


@dataclass
class Table:
    X: np.ndarray | None  # the features side by side; None where ``parts`` holds them
    y: np.ndarray
    columns: list[str]
    task: str  # classification | regression
    num_classes: int = 1
    groups: list[list[int]] | None = None  # column indices per organization (CSV files)
    group_names: list[str] | None = None
    ids: object = None  # CSV files: the aligned IDs, an Arrow array of texts (or a list of them, as given)
    train_rows: int | None = None  # the dataset's own split: the first train_rows rows train, the rest test
    test_rows: np.ndarray | None = None  # row indices the source reserves for test (generated data)
    attributes: list[str] | None = None  # each column's source attribute (one-hot columns share theirs)
    # CSV files with text categories or missing values to be prepared per party (:mod:`vcl.datamodules.prepare`):
    # X then holds NaN for a missing cell; each column's kind ("numeric" / "categorical"), each group's policies,
    # and each text column's strings by column index (an object array, NaN where missing; X holds NaN there)
    kinds: list[str] | None = None
    policies: list[tuple[str, str]] | None = None  # (categorical, missing) per column group
    text: dict[int, np.ndarray] | None = None
    raw_columns: list[list[str]] | None = None  # CSV files: each file's feature columns as it names them
    classes: list[str] | None = None  # classification: each class's name, in the order of the outputs
    # files read for a run: each group's columns as an array of its own (float32, C order) and X None, so that an
    # organization's raw columns go as soon as its rows are prepared (:meth:`take`), not when every one's are
    parts: list[np.ndarray | None] | None = None

    @property
    def rows(self) -> int:
        return len(self.y)

    def matrix(self) -> np.ndarray:
        """The features side by side: X, or the parts put together (a copy; for small tables)."""
        return self.X if self.parts is None else np.concatenate(self.parts, axis=1)

    def take(self, m: int, group: list[int]) -> np.ndarray:
        """Group ``m``'s columns (``group``: their indices): a view of X's where they lie side by side (else a copy);
        or part ``m`` itself, which the table lets go (taken once: the caller holds the only reference)."""
        if self.parts is not None:
            part, self.parts[m] = self.parts[m], None
            return part
        if group == list(range(group[0], group[-1] + 1)):
            return self.X[:, group[0] : group[-1] + 1]
        return self.X[:, group]


def _finish(X, y, names, kind, what: str = "the dataset's label") -> Table:
    y = np.asarray(y)
    if kind == "classification":
        classes, y = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise VCLInputError(
                f"{what} holds a single class ({str(classes[0])!r}); classification needs at least two classes, "
                "or use data.task=regression."
            )
        table = Table(_features(X), y.astype(np.int64), names, kind, len(classes))
        table.classes = [str(c) for c in classes]
        return table
    return Table(_features(X), y.astype(np.float64).reshape(-1, 1), names, kind, 1)


def _features(X) -> np.ndarray:
    """Numbers as float64; float32 (a file read for a run: held once, as the models compute) stays float32."""
    return X if isinstance(X, np.ndarray) and X.dtype == np.float32 else np.asarray(X, dtype=np.float64)
