"""Split one tabular dataset over c × d parties (horizontal and vertical): the DC analysis layout.

Rows: the test rows (the source's own, or the last ``test_fraction`` of a permutation seeded by
``split_seed``), then ``public_rows`` unlabeled rows X_pub from the rest (shareable, all columns), and
the remaining training rows cut into c row groups by a permutation seeded by ``seed``. Columns: d
groups — ``alternate`` (column k to group k mod d: odd/even features for d = 2), ``random`` (seeded),
``type`` (continuous, then categorical) or ``named`` (an explicit assignment). Party (i, j) holds the
columns of group j for the training rows of group i (``X_{i,j}``) with that group's labels ``Y_i``,
and its columns of every test row. Features are z-scored with training statistics unless
``standardize=False`` (the paper's artificial problem is analysed in raw units).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytorch_lightning as pl
import torch
from torch import Tensor
from vcl.datamodules.sources import load_table
from vcl.datamodules.table import Table
from vcl.datamodules.tabular import (
    FeatureView,
    Resampling,
    named_column_split,
    random_column_split,
    seeded_permutation,
    test_rows_of,
)
from vcl.datamodules.view import PartyDataModule, label_targets

from vcl.errors import VCLInputError

FEATURE_SPLITS = ("alternate", "random", "type", "named")


def feature_groups(
    table: Table, groups: int, how: str, seed: int = 0, assignment: dict | None = None
) -> tuple[list[list[int]], list[str]]:
    """Column indices of each of the d feature groups, and the groups' names."""
    m = len(table.columns)
    if how == "named":
        if not assignment:
            raise VCLInputError("dc.feature_split=named needs `assignment`: {group: [column, ...]}, one per group.")
        return named_column_split(table.columns, assignment)
    if how == "type":
        values = table.X
        categorical = [
            k for k in range(m) if np.all(values[:, k] == np.round(values[:, k])) and len(np.unique(values[:, k])) <= 20
        ]
        continuous = [k for k in range(m) if k not in categorical]
        if groups != 2 or not categorical or not continuous:
            raise VCLInputError(
                f"dc.feature_split=type needs 2 column groups and both continuous and categorical columns "
                f"(found {len(continuous)} continuous, {len(categorical)} categorical); use alternate or random."
            )
        return [continuous, categorical], ["continuous", "categorical"]
    if groups < 1 or groups > m:
        raise VCLInputError(f"dc.column_groups={groups}; use 1..{m} so every group holds a feature.")
    if how == "alternate":
        return [list(range(j, m, groups)) for j in range(groups)], [f"g{j + 1}" for j in range(groups)]
    if how == "random":
        return random_column_split(m, groups, seed), [f"g{j + 1}" for j in range(groups)]
    raise VCLInputError(f"dc.feature_split={how!r} is unknown; use one of {', '.join(FEATURE_SPLITS)}.")


@dataclass
class GridData:
    """What the DC protocols are handed: party views [i][j], labels per row group, public rows.

    ``labels`` ({"train": Y_1; …; Y_c, "test": y_test}) and :meth:`full` are the experimenter's view
    for evaluation (metrics, the Centralized reference); the protocols' algorithms see only the parties.
    """

    parties: list[list[FeatureView]]
    group_labels: list[Tensor]
    labels: dict[str, Tensor]
    public: Tensor
    columns: list[str]
    column_groups: list[list[int]]
    task: str
    num_classes: int

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.parties), len(self.column_groups)

    def full(self, split: str) -> Tensor:
        """All columns (original order) of ``split``'s rows; train rows in row-group order."""
        m = len(self.columns)
        rows = [self.parties[0]] if split != "train" else self.parties
        blocks = []
        for group in rows:
            n = group[0].splits[split].shape[0]
            x = torch.empty(n, m)
            for view, cols in zip(group, self.column_groups, strict=True):
                x[:, cols] = view.splits[split]
            blocks.append(x)
        return torch.cat(blocks)


class GridDataModule(pl.LightningDataModule):
    """DC's c × d parties: row group i, column group j (:class:`GridData`). Party (i, j)'s view
    (:meth:`party`) holds its own features and its row group's labels (a DC user holds the labels of its rows);
    the test labels stay the experimenter's."""

    def __init__(
        self,
        dataset: str = "dc_artificial",
        row_groups: int = 2,
        column_groups: int = 2,
        feature_split: str = "alternate",
        public_rows: int = 100,
        seed: int = 0,
        split_seed: int = 0,
        test_fraction: float = 0.2,
        resample: Resampling | None = None,
        standardize: bool = True,
        assignment: dict | None = None,
    ):
        super().__init__()
        if not 0.0 < test_fraction < 1.0:
            raise VCLInputError(f"data.test_fraction={test_fraction}; use a fraction strictly between 0 and 1.")
        self.resample = resample or Resampling()
        self.resample.refuse("the DC methods split their training rows into row groups once", ("bootstrap",))
        if row_groups < 1:
            raise VCLInputError(f"dc.row_groups={row_groups}; use at least 1.")
        if public_rows < 0:
            raise VCLInputError(f"dc.public_rows={public_rows}; use 0 or more.")
        self.dataset, self.row_groups, self.column_groups = dataset, row_groups, column_groups
        self.feature_split, self.public_rows = feature_split, public_rows
        self.seed, self.split_seed, self.test_fraction = seed, split_seed, test_fraction
        self.standardize, self.assignment = standardize, assignment
        self.data: GridData | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.data is None:
            if self.dataset == "csv":
                raise VCLInputError("the DC methods take one table (a built-in dataset), not data.dataset=csv.")
            self.data = self.split(load_table(self.dataset, seed=self.split_seed))

    def party(self, i: int, j: int) -> PartyDataModule:
        """Party (i, j)'s view: its features of its rows and the test rows, its row group's labels as targets."""
        self.setup()
        view, d = self.data.parties[i][j], self.data
        targets = {"train": label_targets(d.group_labels[i], d.task, d.num_classes)}
        return PartyDataModule(view.splits, targets, name=view.name)

    def row_splits(self, table: Table) -> dict[str, np.ndarray]:
        n = table.X.shape[0]
        folds, fold = self.resample.folds, self.resample.fold
        perm = seeded_permutation(n, self.split_seed, folds, fold)
        if table.test_rows is not None:
            self.resample.refuse(f"{self.dataset} comes with its own test split", ("folds",))
            test = np.asarray(table.test_rows)
            rest = perm[~np.isin(perm, test)]
        else:
            n_rest = n - test_rows_of(n, self.test_fraction, folds, fold)
            test, rest = perm[n_rest:], perm[:n_rest]
        public, train = rest[: self.public_rows], rest[self.public_rows :]
        if len(train) < 2 * self.row_groups or len(test) < 1:
            raise VCLInputError(
                f"dataset {self.dataset!r}: {len(train)} training rows after {self.public_rows} public and "
                f"{len(test)} test rows, too few for {self.row_groups} row groups; "
                "lower dc.public_rows or dc.row_groups."
            )
        groups = np.array_split(np.random.RandomState(self.seed).permutation(train), self.row_groups)
        return {"test": test, "public": public, **{f"group{i}": g for i, g in enumerate(groups)}}

    def split(self, table: Table) -> GridData:
        if table.task != "classification":
            raise VCLInputError(
                f"dataset {self.dataset!r} is a {table.task} task; the DC methods need a classification dataset."
            )
        if not np.isfinite(table.X).all():
            raise VCLInputError(f"dataset {self.dataset!r} has NaN or infinite features; impute or drop them first.")
        cols, names = feature_groups(table, self.column_groups, self.feature_split, self.seed, self.assignment)
        rows = self.row_splits(table)
        train = np.concatenate([rows[f"group{i}"] for i in range(self.row_groups)])
        X = table.X
        if self.standardize:
            mean, std = X[train].mean(0), X[train].std(0)
            std[std == 0] = 1.0
            X = (X - mean) / std
        X = X.astype(np.float32)
        y = torch.from_numpy(table.y)
        parties = [
            [
                FeatureView(
                    f"party{i + 1}.{j + 1}",
                    [table.columns[k] for k in g],
                    {
                        "train": torch.from_numpy(X[np.ix_(rows[f"group{i}"], g)]),
                        "test": torch.from_numpy(X[np.ix_(rows["test"], g)]),
                    },
                )
                for j, g in enumerate(cols)
            ]
            for i in range(self.row_groups)
        ]
        group_labels = [y[rows[f"group{i}"]] for i in range(self.row_groups)]
        return GridData(
            parties=parties,
            group_labels=group_labels,
            labels={"train": torch.cat(group_labels), "test": y[rows["test"]]},
            public=torch.from_numpy(X[rows["public"]]),
            columns=list(table.columns),
            column_groups=cols,
            task=table.task,
            num_classes=table.num_classes,
        )
