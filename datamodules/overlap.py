"""Two parties whose rows only partly co-occur: MPDL's sample-overlap split (Section IV-B).

Party A and party B hold different features; B holds the labels. ``test_fraction`` of the rows (10% in
the paper, seeded by ``split_seed``) are test rows with every feature. The rest, N rows shuffled by
``seed``, are cut by the co-occurrence probability γ:

- D_C = N·[0, γ]: rows both parties hold (found by private set intersection, :mod:`vcl.methods.mpdl.blinding`);
- D_B = N·(γ, 0.5 + γ/2]: rows only B holds (with labels);
- D_A = N·(0.5 + γ/2, 1]: rows only A holds (no labels; the experimenter scores MPDL_A / FTL_A on them).

Each party's rows come in its own order under string IDs; nothing is aligned until the PSI runs.

Features: a table's columns are cut in two by a permutation seeded by ``seed`` (the paper assigns them
randomly), or by an ``assignment`` {a: [...], b: [...]}. Images (the paper's masks): A holds the bottom
18 of 28 rows (CIFAR-10: 20 of 32), B the whole image but a stained 14×16 lower-right corner (CIFAR-10:
16×18); other image sizes scale those fractions. Pixels are flattened to rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytorch_lightning as pl
import torch
from torch import Tensor
from vcl.datamodules.image import IMAGE_DATASETS, load_images
from vcl.datamodules.sources import load_table
from vcl.datamodules.tabular import Resampling, named_column_split, random_column_split
from vcl.datamodules.view import PartyDataModule, label_targets

from vcl.errors import VCLInputError

# (rows A keeps at the bottom, (stained rows, stained columns) of B's lower-right corner) for 28×28 and 32×32
IMAGE_MASKS = {28: (18, (14, 16)), 32: (20, (16, 18))}


@dataclass
class PartyData:
    """What one party holds: its training rows (``ids`` in its own order), its features of the test rows,
    and — party B only — the labels of its training rows."""

    name: str
    columns: list[str]
    ids: list[str]
    train: Tensor
    test: Tensor
    labels: Tensor | None = None
    image_shape: tuple[int, int, int] | None = None  # images: (C, H, W) of the whole image
    pixels: np.ndarray | None = None  # images: the flat C·H·W position of each of the party's columns
    bounds: tuple[float, float] | None = None  # public range of every feature (images: (0, 1)); None: unknown

    @property
    def num_features(self) -> int:
        return self.train.shape[1]


@dataclass
class OverlapData:
    """Both parties, the test labels, and the experimenter's view used only for scoring.

    ``truth`` holds, for the rows only one party has, the other party's raw features and the labels of
    D_A (keys ``a_only_labels``, ``b_features_of_a_only`` in A's row order, ``a_features_of_b_only`` in B's):
    what MPDL_A accuracy and the inference MAE of Section IV-F are measured against. No party reads it.
    """

    a: PartyData
    b: PartyData
    test_labels: Tensor
    truth: dict[str, Tensor]
    counts: dict[str, int]
    task: str
    num_classes: int
    gamma: float

    @property
    def labels(self) -> dict[str, Tensor]:
        """Labels per evaluation split: the test rows and the rows only A holds (the experimenter's)."""
        return {"train": self.b.labels, "test": self.test_labels, "a_only": self.truth["a_only_labels"]}


def overlap_counts(n: int, gamma: float) -> dict[str, int]:
    """Row counts of D_C, D_B, D_A for N rows: N·[0, γ], N·(γ, 0.5 + γ/2], the rest."""
    n_c = int(round(n * gamma))
    n_cb = int(round(n * (0.5 + gamma / 2)))
    return {"overlap": n_c, "b_only": n_cb - n_c, "a_only": n - n_cb}


def image_masks(channels: int, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Boolean pixel masks (C·H·W,) of A (bottom rows) and B (all but the stained lower-right corner)."""
    if height in IMAGE_MASKS and height == width:
        keep, (sh, sw) = IMAGE_MASKS[height]
    else:
        keep, sh, sw = round(18 / 28 * height), round(14 / 28 * height), round(16 / 28 * width)
    a = np.zeros((channels, height, width), dtype=bool)
    a[:, height - keep :, :] = True
    b = np.ones((channels, height, width), dtype=bool)
    b[:, height - sh :, width - sw :] = False
    return a.reshape(-1), b.reshape(-1)


class OverlapDataModule(pl.LightningDataModule):
    """MPDL's two partly overlapping parties (:class:`OverlapData`). A party's view (:meth:`party`) holds its own
    rows' features (``train``) and its features of the test rows; party B's also its training labels."""

    def __init__(
        self,
        dataset: str = "breast_cancer",
        gamma: float = 0.1,
        seed: int = 0,
        split_seed: int = 0,
        test_fraction: float = 0.1,
        resample: Resampling | None = None,
        assignment: dict | None = None,
        root: str = "data",
        max_rows: int = 0,
    ):
        super().__init__()
        if not 0.0 < gamma < 1.0:
            raise VCLInputError(f"mpdl.gamma={gamma}; use a co-occurrence probability strictly between 0 and 1.")
        if not 0.0 < test_fraction < 1.0:
            raise VCLInputError(f"data.test_fraction={test_fraction}; use a fraction strictly between 0 and 1.")
        if dataset == "csv":
            raise VCLInputError("MPDL takes one built-in table or image dataset, not data.dataset=csv.")
        (resample or Resampling()).refuse("MPDL draws its test rows by data.test_fraction (its K folds are mpdl.folds)")
        self.dataset, self.gamma, self.seed, self.split_seed = dataset, gamma, seed, split_seed
        self.test_fraction, self.assignment, self.root, self.max_rows = test_fraction, assignment, root, max_rows
        self.data: OverlapData | None = None
        self.image_shape: tuple[int, int, int] | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.data is None:
            X, y, columns, cols_a, cols_b, task, k = self._load()
            self.data = self.split(X, y, columns, cols_a, cols_b, task, k)

    def party(self, name: str) -> PartyDataModule:
        """Party ``a`` or ``b``'s view."""
        self.setup()
        d = self.data
        party = {"a": d.a, "b": d.b}[name]
        targets = None if party.labels is None else {"train": label_targets(party.labels, d.task, d.num_classes)}
        return PartyDataModule({"train": party.train, "test": party.test}, targets, name=party.name)

    def _load(self):
        if self.dataset in IMAGE_DATASETS:
            images = load_images(self.dataset, self.root)
            x, y = images.images, images.labels
            if images.test_images is not None:
                x, y = np.concatenate([x, images.test_images]), np.concatenate([y, images.test_labels])
            c, h, w = x.shape[1:]
            mask_a, mask_b = image_masks(c, h, w)
            names = [f"c{ch}r{i}c{j}" for ch in range(c) for i in range(h) for j in range(w)]
            X = x.reshape(len(x), -1)
            self.image_shape = (c, h, w)
            return X, y, names, list(np.flatnonzero(mask_a)), list(np.flatnonzero(mask_b)), "classification", 10
        table = load_table(self.dataset, seed=self.split_seed, root=self.root)
        if table.task != "classification":
            raise VCLInputError(
                f"dataset {self.dataset!r} is a {table.task} task; MPDL needs a classification dataset."
            )
        if not np.isfinite(table.X).all():
            raise VCLInputError(f"dataset {self.dataset!r} has NaN or infinite features; impute or drop them first.")
        if self.assignment:
            if set(self.assignment) != {"a", "b"}:
                raise VCLInputError("assignment for MPDL names two parties: {a: [columns], b: [columns]}.")
            (cols_a, cols_b), _ = named_column_split(
                table.columns, {"a": self.assignment["a"], "b": self.assignment["b"]}
            )
        else:
            cols_a, cols_b = random_column_split(len(table.columns), 2, self.seed, table.attributes)
        return table.X, table.y, list(table.columns), cols_a, cols_b, table.task, table.num_classes

    def split(self, X, y, columns, cols_a, cols_b, task, num_classes) -> OverlapData:
        n_all = len(X)
        perm = np.random.RandomState(self.split_seed).permutation(n_all)
        if self.max_rows:
            perm = perm[: self.max_rows]
        n_test = max(1, int(round(len(perm) * self.test_fraction)))
        test, rest = perm[:n_test], perm[n_test:]
        rest = rest[np.random.RandomState(self.seed).permutation(len(rest))]
        counts = overlap_counts(len(rest), self.gamma)
        if counts["overlap"] < 10 or counts["b_only"] < 1 or counts["a_only"] < 1:
            raise VCLInputError(
                f"dataset {self.dataset!r}: {len(rest)} training rows with mpdl.gamma={self.gamma} give "
                f"{counts['overlap']} co-occurring rows (D_C), {counts['b_only']} B-only and "
                f"{counts['a_only']} A-only; "
                f"give D_C at least 10 rows (2 per fold) and leave rows for D_B and D_A: raise mpdl.gamma"
                + (f" or mpdl.max_rows (now {self.max_rows})." if self.max_rows else ".")
            )
        d_c = rest[: counts["overlap"]]
        d_b = rest[counts["overlap"] : counts["overlap"] + counts["b_only"]]
        d_a = rest[counts["overlap"] + counts["b_only"] :]
        X = X.astype(np.float32)
        rng = np.random.RandomState(self.seed + 7919)
        rows_a = np.concatenate([d_c, d_a])[rng.permutation(len(d_c) + len(d_a))]  # A's own order
        rows_b = np.concatenate([d_c, d_b])[rng.permutation(len(d_c) + len(d_b))]  # B's own order

        def ids(rows):
            return [f"id{int(r):06d}" for r in rows]

        def block(rows, cols):
            return torch.from_numpy(X[np.ix_(rows, cols)])

        shape = self.image_shape

        def geometry(cols):
            if not shape:
                return {"image_shape": None, "pixels": None}
            return {"image_shape": shape, "pixels": np.asarray(cols), "bounds": (0.0, 1.0)}  # pixels in [0, 1]

        a_cols, b_cols = [columns[i] for i in cols_a], [columns[i] for i in cols_b]
        a = PartyData("a", a_cols, ids(rows_a), block(rows_a, cols_a), block(test, cols_a), **geometry(cols_a))
        labels_b = torch.from_numpy(y[rows_b].astype(np.int64))
        b = PartyData(
            "b", b_cols, ids(rows_b), block(rows_b, cols_b), block(test, cols_b), labels_b, **geometry(cols_b)
        )
        a_only = rows_a[np.isin(rows_a, d_a)]
        b_only = rows_b[np.isin(rows_b, d_b)]
        truth = {
            "a_only_labels": torch.from_numpy(y[a_only].astype(np.int64)),
            "b_features_of_a_only": block(a_only, cols_b),
            "a_features_of_b_only": block(b_only, cols_a),
        }
        return OverlapData(
            a=a,
            b=b,
            test_labels=torch.from_numpy(y[test].astype(np.int64)),
            truth=truth,
            counts={**counts, "test": n_test},
            task=task,
            num_classes=int(num_classes),
            gamma=self.gamma,
        )
