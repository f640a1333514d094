"""Split one tabular dataset into M organizations' column groups (GAL's vertical split).

Rows: a seeded permutation (``split_seed``, fixed across run seeds), the last ``test_fraction`` for
test and an optional ``val_fraction`` of the rest for validation. Columns: a permutation seeded by
``feature_seed`` cut into M chunks of ``d // M``, the last organization taking the remainder (as
the GAL authors do), or an explicit assignment by column name, or — for CSV data — one organization per file.
Features are z-scored with training statistics. Alice is organization 0 and holds the labels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset
from vcl.datamodules.csv_files import csv_policies, in_threads, load_new_rows
from vcl.datamodules.prepare import Preparation, coded, prepare_group
from vcl.datamodules.rows import all_finite, column_values
from vcl.datamodules.sources import load_table
from vcl.datamodules.table import Table
from vcl.datamodules.view import PartyDataModule, label_targets

from vcl.engine import memory
from vcl.errors import VCLInputError


def random_column_split(
    num_features: int, organizations: int, seed: int, attributes: list[str] | None = None
) -> list[list[int]]:
    """Seeded permutation of the columns cut into ``d // M`` chunks; the last takes the remainder.
    With ``attributes`` (each column's attribute), whole attributes are split that way instead."""
    if attributes is not None:
        units = list(dict.fromkeys(attributes))
        chunks = random_column_split(len(units), organizations, seed)
        owner = {units[u]: m for m, chunk in enumerate(chunks) for u in chunk}
        return [[j for j, a in enumerate(attributes) if owner[a] == m] for m in range(len(chunks))]
    if organizations < 1:
        raise VCLInputError(f"data.organizations={organizations}; use at least 1.")
    if organizations > num_features:
        raise VCLInputError(
            f"data.organizations={organizations} exceeds the {num_features} features; "
            f"use organizations ≤ {num_features} so every organization holds a feature."
        )
    perm = np.random.RandomState(seed).permutation(num_features)
    size = num_features // organizations
    chunks = [perm[m * size : (m + 1) * size] for m in range(organizations - 1)]
    chunks.append(perm[(organizations - 1) * size :])
    return [sorted(int(i) for i in c) for c in chunks]


def named_column_split(columns: list[str], assignment: dict[str, list[str]]) -> tuple[list[list[int]], list[str]]:
    """Columns assigned by name: ``{organization: [column, ...]}`` (Alice first)."""
    index = {c: i for i, c in enumerate(columns)}
    groups, owner = [], {}
    for org, names in assignment.items():
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", str(org)):
            raise VCLInputError(
                f"assignment names organization {org!r}; use letters, digits, _ . - (it names its checkpoint folder)."
            )
        if not names:
            raise VCLInputError(f"assignment gives organization {org!r} no columns; give it at least one.")
        group = []
        for c in names:
            if c not in index:
                raise VCLInputError(f"assignment for {org!r} names unknown column {c!r}; columns are {columns}.")
            if c in owner:
                raise VCLInputError(f"column {c!r} is assigned to both {owner[c]!r} and {org!r}; give it to one.")
            owner[c] = org
            group.append(index[c])
        groups.append(group)
    return groups, list(assignment)


def check_fractions(test_fraction: float, val_fraction: float) -> None:
    if not 0.0 < test_fraction < 1.0:
        raise VCLInputError(f"data.test_fraction={test_fraction}; use a fraction strictly between 0 and 1.")
    if not 0.0 <= val_fraction < 1.0:
        raise VCLInputError(f"data.val_fraction={val_fraction}; use a fraction in [0, 1).")


@dataclass(frozen=True)
class Resampling:
    """How rows are drawn beyond ``test_fraction`` (``data.folds``, ``data.fold``, ``data.bootstrap``): the test rows
    as fold ``fold`` of ``folds`` (K-fold cross-validation), and the training rows as a draw with replacement."""

    folds: int = 0
    fold: int = 0
    bootstrap: bool = False

    def refuse(self, reason: str, what: tuple[str, ...] = ("folds", "bootstrap")) -> None:
        """One sentence naming the options of ``what`` set here and ``reason`` why they cannot be; none if unset."""
        used = [f"data.{w}" for w in what if getattr(self, w)]
        if used:
            raise VCLInputError(f"{' / '.join(used)}: {reason}; leave {'it' if len(used) == 1 else 'them'} off.")


def seeded_permutation(n: int, split_seed: int, folds: int = 0, fold: int = 0) -> np.ndarray:
    """The rows in the order the splits take them from: a permutation seeded by ``split_seed``; with ``folds`` = K
    (K-fold cross-validation), rotated so that fold ``fold`` of the K contiguous folds comes last, where the test
    rows are taken from (each row is a test row in exactly one fold)."""
    perm = np.random.RandomState(split_seed).permutation(n)
    if not folds:
        return perm
    if not 0 <= fold < folds or folds > n:
        raise VCLInputError(f"data.fold={fold} of data.folds={folds} for {n} rows; use a fold in 0..{folds - 1}.")
    parts = np.array_split(perm, folds)
    return np.concatenate([*parts[:fold], *parts[fold + 1 :], parts[fold]])


def test_rows_of(n: int, test_fraction: float, folds: int, fold: int) -> int:
    """How many rows the test split takes from the end of :func:`seeded_permutation`."""
    return len(np.array_split(np.arange(n), folds)[fold]) if folds else n - int(n * (1.0 - test_fraction))


def seeded_row_splits(
    n: int,
    split_seed: int,
    test_fraction: float,
    val_fraction: float,
    train_rows: int | None = None,
    resample: Resampling = Resampling(),
) -> dict[str, np.ndarray]:
    """Row indices per split: a permutation seeded by ``split_seed``, the last ``test_fraction`` for test (with
    ``resample.folds``: fold ``fold`` of K, :func:`seeded_permutation`) and ``val_fraction`` of the rest for
    validation; or, with ``train_rows``, the dataset's own split (its first ``train_rows`` rows, shuffled, for
    training). With ``resample.bootstrap``, the training rows are as many drawn with replacement from them (seeded
    by ``split_seed``): a row may train several times, and the test rows stay apart."""
    folds, fold = resample.folds, resample.fold
    if train_rows is not None:
        resample.refuse("this dataset comes with its own test split", ("folds",))
    perm = seeded_permutation(n, split_seed, folds, fold)
    n_train = n - test_rows_of(n, test_fraction, folds, fold)
    if train_rows is not None:
        first = np.random.RandomState(split_seed).permutation(train_rows)
        perm, n_train = np.concatenate([first, np.arange(train_rows, n)]), train_rows
    n_val = int(round(n_train * val_fraction))
    if n - n_train < 1 or n_train < 2:
        raise VCLInputError(f"only {n} rows: too few for the train/test split; supply more data.")
    if n_train - n_val < 2:
        raise VCLInputError(
            f"data.val_fraction={val_fraction} leaves {n_train - n_val} of {n_train} training rows for training; "
            "use a smaller val_fraction."
        )
    splits = {"train": perm[: n_train - n_val], "test": perm[n_train:]}
    if resample.bootstrap:  # a stream of its own, so the split itself is the same with and without it
        train = splits["train"]
        splits["train"] = train[np.random.default_rng([split_seed, 0xB0075]).integers(0, len(train), len(train))]
    if n_val:
        splits["val"] = perm[n_train - n_val : n_train]
    return splits


def prepared(table: Table, m: int, group: list[int], block: np.ndarray, train: np.ndarray):
    """Group ``m``'s raw columns (``block``: float32, NaN where missing; ``group``: their indices) prepared alone on
    the training rows (:func:`vcl.datamodules.prepare.prepare_group`): its prepared column names, their numbers
    (float32, C order) and its fitted :class:`~vcl.datamodules.prepare.Preparation`. Its text columns leave the
    table's ``text`` as they are encoded (once: their codes serve the fit and the encoding)."""
    texts = {j: coded(table.text.pop(i)) for j, i in enumerate(group) if i in (table.text or {})}
    names, preparation = prepare_group(
        block, [table.kinds[i] for i in group], [table.columns[i] for i in group], table.policies[m][1], train, texts
    )
    out = np.empty((block.shape[0], len(names)), dtype=block.dtype)  # row by row, as the splits take it
    return names, preparation.encode(block, texts, out=out), preparation


def is_sorted(a: np.ndarray) -> bool:
    return bool((a[1:] >= a[:-1]).all())


def column_statistics(X: np.ndarray, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's mean and standard deviation over the training rows (a constant column's deviation is 1). A
    float32 table (a file read for a run, held row by row) is summed in float64 a column at a time, over its
    training rows taken in row order (:func:`vcl.datamodules.rows.column_values`: sweeps of memory, no jump a row)."""
    if X.dtype == np.float32:
        rows = train if is_sorted(train) else np.sort(train)
        mean, std = np.empty(X.shape[1]), np.empty(X.shape[1])
        for j, values in column_values(X, rows):
            column = values.astype(np.float64)
            mean[j], std[j] = column.mean(), column.std()
    else:
        rows = X[train]
        mean, std = rows.mean(0), rows.std(0)
    std[std == 0] = 1.0
    return mean, std


@dataclass
class FeatureView:
    """One organization's columns of the aligned rows, per split ("train", "val", "test"; "new": new people's rows,
    for ``train.py predict``), and how its columns were prepared (a table's: its fitted preparation)."""

    name: str
    columns: list[str]
    splits: dict[str, Tensor]
    # made from the data, so not digested (a digest before version 2 took it in, in a form vcl.coordinator.runner keeps)
    preparation: object | None = field(default=None, metadata={"digest": "before 2"})

    @property
    def num_features(self) -> int:
        return len(self.columns)

    @property
    def example_shape(self) -> tuple[int, ...]:
        """Shape of one example: (d,) for rows, (C, H, W) for image patches, (T, F) for sequences."""
        return tuple(next(iter(self.splits.values())).shape[1:])

    def to(self, device) -> FeatureView:
        """The view on ``device``: itself where every split is there already (a party built from it shares its
        splits, so the fast engine's stack of them holds the rows once: :mod:`vcl.engine.concurrent`)."""
        splits = {k: v.to(device) for k, v in self.splits.items()}
        if all(splits[k] is v for k, v in self.splits.items()):
            return self
        return FeatureView(self.name, self.columns, splits, self.preparation)


def kept_preparations(view: FeatureView) -> list[dict] | None:
    """What a party keeps of its view's preparation (:meth:`vcl.family.Party.preparation`): each organization's
    fitted :class:`~vcl.datamodules.prepare.Preparation` whose columns it holds, as data; None for a view not read
    from an organization's file."""
    preps = view.preparation if isinstance(view.preparation, list) else [view.preparation]
    if not preps or any(p is None or p.read is None for p in preps):
        return None
    return [p.state() for p in preps]


@dataclass
class VerticalData:
    """What a protocol is handed: per-organization views and Alice's labels per split.

    ``joint`` is every feature held by one party (the Joint baseline); ``None`` means the views
    concatenated along their feature axis.
    """

    views: list[FeatureView]
    labels: dict[str, Tensor]
    task: str
    num_classes: int
    joint: FeatureView | None = None
    ids: object = None  # dataset=csv: the aligned IDs (an Arrow array of texts), in row order (before the split)
    new_ids: list[str] | None = None  # train.py predict: the new people's aligned IDs (each view's split "new")
    classes: list[str] | None = None  # classification: the classes' names, in the order of the outputs
    # grpc: by party, where Alice's PSI found each aligned ID in that party's offer (a hint its Setup checks, not
    # data: no digest of the data holds it, as a resumed run, which aligns no rows again, has none)
    places: dict | None = field(default=None, repr=False, metadata={"digest": False})
    # train.py predict of a finished run: where each party finds its own checkpoint to be built again from (the
    # run's stamp, each party's round and folder; vcl.use.predict)
    checkpoints: dict | None = field(default=None, repr=False, metadata={"digest": False})

    def joint_view(self) -> FeatureView:
        if self.joint is not None:
            return self.joint
        cols = [c for v in self.views for c in v.columns]
        splits = {s: torch.cat([v.splits[s] for v in self.views], dim=-1) for s in self.views[0].splits}
        return FeatureView(self.views[0].name, cols, splits, [v.preparation for v in self.views])


class VerticalDataModule(pl.LightningDataModule):
    """What every vertical split shares: ``setup()`` builds ``self.data`` (a :class:`VerticalData`); each party's
    view is a LightningDataModule of its own (:meth:`party`), and the module's own loaders serve every feature
    with Alice's labels (centralized models: the Joint baseline). A subclass's ``setup()`` sets ``self.data`` to a
    :class:`VerticalData`: Alice's view first, every view the same rows in the same order per split ("train" and
    "test" at least)."""

    batch_size: int = 1024
    data: VerticalData | None = None

    @property
    def num_parties(self) -> int:
        self.setup()
        return len(self.data.views)

    def party(self, m: int, targets: Tensor | dict[str, Tensor] | None = None) -> PartyDataModule:
        """Party ``m``'s view (0: Alice): its own features per split; Alice's with her labels as targets, another
        party's with ``targets`` (what Alice sent it), if given."""
        self.setup()
        view = self.data.views[m]
        if targets is None and m == 0:
            targets = {s: label_targets(y, self.data.task, self.data.num_classes) for s, y in self.data.labels.items()}
        return PartyDataModule(view.splits, targets, batch_size=self.batch_size, name=view.name)

    def dataloader(self, split: str, organization: int | None = None, shuffle: bool = False) -> DataLoader:
        self.setup()
        view = self.data.joint_view() if organization is None else self.data.views[organization]
        return DataLoader(
            TensorDataset(view.splits[split], self.data.labels[split]), batch_size=self.batch_size, shuffle=shuffle
        )

    def train_dataloader(self) -> DataLoader:
        return self.dataloader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.dataloader("val" if "val" in self.data.labels else "test")

    def test_dataloader(self) -> DataLoader:
        return self.dataloader("test")


class TabularDataModule(VerticalDataModule):
    def __init__(
        self,
        dataset: str = "wine",
        organizations: int = 8,
        feature_seed: int = 0,
        split_seed: int = 0,
        test_fraction: float = 0.2,
        resample: Resampling | None = None,
        val_fraction: float = 0.0,
        assignment: dict[str, list[str]] | None = None,
        csv_files: list[str] | None = None,
        id_column: str = "id",
        label_column: str = "label",
        task: str | None = None,
        batch_size: int = 1024,
        synthetic_train: int = 1000,
        synthetic_test: int = 100000,
        root: str = "data",
        only: int | None = None,
        ids: list[str] | None = None,
        categorical: list[str] | tuple = ("error",),
        missing: list[str] | tuple = ("error",),
        new_files: list[str] | None = None,
        new_ids: list[str] | None = None,
        kept: dict[int, Preparation] | None = None,
    ):
        super().__init__()
        check_fractions(test_fraction, val_fraction)
        self.root = root
        self.dataset = dataset
        self.organizations = organizations
        self.feature_seed = feature_seed
        self.split_seed = split_seed
        self.test_fraction = test_fraction
        self.resample = resample or Resampling()
        self.val_fraction = val_fraction
        self.assignment = assignment
        self.csv_files = list(csv_files or [])
        self.id_column, self.label_column, self.task = id_column, label_column, task
        self.batch_size = batch_size
        self.synthetic_train, self.synthetic_test = synthetic_train, synthetic_test
        self.only, self.ids = only, ids  # dataset=csv: read organization ``only``'s file alone, on rows ``ids``
        self.categorical, self.missing = list(categorical), list(missing)  # dataset=csv: per file, or one for all
        self.new_files, self.new_ids = list(new_files or []), new_ids  # train.py predict: new people's files
        self.kept = kept  # train.py predict of a finished run: each organization's kept preparation, by its place
        self.data: VerticalData | None = None
        self._trained: list | None = None  # dataset=csv: each file's (columns, kinds, policies), for new rows

    def setup(self, stage: str | None = None) -> None:
        if self.data is not None:
            return
        if self.kept is not None:
            self.data = self.kept_rows()
            return
        table = load_table(
            self.dataset,
            self.csv_files,
            self.id_column,
            self.label_column,
            self.task,
            self.synthetic_train,
            self.synthetic_test,
            seed=self.split_seed,
            root=self.root,
            only=self.only,
            ids=self.ids,
            categorical=self.categorical,
            missing=self.missing,
        )
        if table.raw_columns is not None:
            kinds = table.kinds or ["numeric"] * len(table.columns)
            policies = csv_policies(self.categorical, self.missing, len(self.csv_files))
            policies = policies if self.only is None else [policies[self.only]]
            self._trained = [
                (cols, [kinds[i] for i in g], p)
                for cols, g, p in zip(table.raw_columns, table.groups, policies, strict=True)
            ]
        self.data = self.split(table)
        del table
        memory.mark("prepare")
        if self._trained is not None:  # each organization's preparation names its file's columns and its place
            places = range(len(self.csv_files)) if self.only is None else [self.only]
            for view, (cols, _, _), k in zip(self.data.views, self._trained, places, strict=True):
                view.preparation.read, view.preparation.place = list(cols), k
        if self.new_files:
            self.data = self.with_new_rows(self.data)

    def with_new_rows(self, data: VerticalData) -> VerticalData:
        """``data`` with new people's rows (``new_files``) as each view's split "new", read and prepared as training
        prepared its own rows (:func:`vcl.datamodules.csv_files.load_new_rows`)."""

        if self._trained is None:
            raise VCLInputError(
                f"data.dataset={self.dataset} predicts its own test split; give new files only to a run on csv files."
            )
        keys, blocks = load_new_rows(
            self.new_files, self._trained, self.id_column, self.label_column, self.only, self.new_ids
        )
        for view, (block, text) in zip(data.views, blocks.values(), strict=True):
            view.splits["new"] = view.preparation.prepare(block, text)
        return replace(data, new_ids=keys)

    def kept_rows(self) -> VerticalData:
        """New people's rows alone (``new_files``), each organization's read and checked as its training file was
        and prepared with the preparation it kept (``kept``, from its own checkpoint): no training file is read. An
        organization whose preparation is not here (a party that holds none: Alice alone) gives only its IDs to the
        row alignment, and a view without rows. Labels, task and classes are the run's, not the data's."""

        places = range(len(self.csv_files)) if self.only is None else [self.only]
        policies = csv_policies(self.categorical, self.missing, len(self.csv_files))
        trained = [(p.read, p.kinds, policies[k]) if (p := self.kept.get(k)) else None for k in places]
        keys, blocks = load_new_rows(
            self.new_files, trained, self.id_column, self.label_column, self.only, self.new_ids
        )
        views = []
        for k in places:
            name, prep = Path(self.csv_files[k]).stem, self.kept.get(k)
            if prep is None:
                views.append(FeatureView(name, [], {}))
                continue
            views.append(FeatureView(name, prep.columns, {"new": prep.prepare(*blocks[k])}, prep))
        return VerticalData(views, {}, self.task or "classification", 0, new_ids=keys)

    def column_groups(self, table: Table) -> tuple[list[list[int]], list[str]]:
        if table.groups is not None:
            return table.groups, table.group_names
        if self.assignment:
            return named_column_split(table.columns, self.assignment)
        groups = random_column_split(len(table.columns), self.organizations, self.feature_seed, table.attributes)
        return groups, ["alice"] + [f"org{m}" for m in range(1, len(groups))]

    def row_splits(self, n: int, train_rows: int | None = None) -> dict[str, np.ndarray]:
        """A seeded permutation cut by ``test_fraction``; or the dataset's own split (``train_rows`` first)."""
        return seeded_row_splits(n, self.split_seed, self.test_fraction, self.val_fraction, train_rows, self.resample)

    def split(self, table: Table) -> VerticalData:
        """Each organization's rows of each split, prepared (CSV columns with text or missing cells) and z-scored on
        its own training rows, two organizations at a time (NumPy and Arrow release the GIL: both cores of a laptop;
        more at once would hold more organizations' prepared columns): a table held as parts (files read for a run)
        lets each organization's raw columns go once its splits are made."""
        groups, names = self.column_groups(table)
        rows = self.row_splits(table.rows, table.train_rows)
        whole = None  # a float64 table's statistics, all columns at once
        if table.parts is None and table.X.dtype != np.float32 and table.kinds is None:
            whole = column_statistics(table.X, rows["train"])
        train = np.sort(rows["train"])  # for each organization's statistics: sorted once

        def view(m: int) -> FeatureView:  # organization m's, prepared and z-scored on its own
            g = groups[m]
            block, columns = table.take(m, g), [table.columns[i] for i in g]
            prep = Preparation(columns, ["numeric"] * len(g))
            if table.kinds is not None:  # CSV columns each organization prepares on its own training rows
                columns, block, prep = prepared(table, m, g, block, train)
            if not all_finite(block):
                raise VCLInputError(
                    f"dataset {self.dataset!r} has NaN or infinite features; impute or drop them first."
                )
            prep.mean, prep.std = column_statistics(block, train) if whole is None else (whole[0][g], whole[1][g])
            splits = {s: torch.from_numpy(prep.scale(block, r)) for s, r in rows.items()}  # each split's rows, scaled
            return FeatureView(names[m], columns, splits, prep)  # its raw columns go as it returns

        views = in_threads(view, list(range(len(groups))), at_most=2)
        labels = {s: torch.from_numpy(table.y[r]) for s, r in rows.items()}
        if table.task == "regression":
            labels = {s: y.to(torch.float32) for s, y in labels.items()}
        return VerticalData(views, labels, table.task, table.num_classes, ids=table.ids, classes=table.classes)


def hollow(view: FeatureView) -> FeatureView:
    """A party's name without its data: what the coordinator knows of a party that runs elsewhere."""
    return FeatureView(view.name, [], {})
