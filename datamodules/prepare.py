"""Each organization's own preparation of its columns, fitted on its training rows only and kept, so that new rows
(``train.py predict``) are prepared exactly as the training rows were: text categories one-hot encoded and missing
values imputed (fitted by scikit-learn: ``categorical: onehot``, ``missing: impute``; ``missing: drop`` acts earlier,
when the rows are aligned), then every column z-scored with its training mean and deviation. Nothing about one
organization's columns reaches another's: each group is prepared alone, as its own party would.

A fitted preparation is data (column names, category lists, means and deviations), not code: each party keeps it in
its own checkpoints beside its models (:meth:`Preparation.state`), so a finished run predicts from its checkpoints and
the new rows alone, without its training files (:meth:`Preparation.from_state` checks what it reads back).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from vcl.datamodules.rows import BLOCK, scaled_rows

from vcl.errors import VCLInputError

KINDS = ("numeric", "categorical")


@dataclass
class Preparation:
    """One organization's fitted preparation: its feature columns (``raw``, named as in the run's table; ``read``,
    as in its file; their ``kinds``), what its training rows gave the imputation (``means`` of the numeric columns,
    ``fills``: each text column's most frequent category, by position) and the one-hot encoding (``categories``:
    each text column's categories, sorted), and each prepared column's training mean and deviation."""

    raw: list[str]
    kinds: list[str]
    missing: str = "error"
    means: np.ndarray | None = None  # numeric columns' training means, for their empty cells (missing: impute)
    fills: dict = field(default_factory=dict)  # text column position → its most frequent category (impute)
    categories: dict = field(default_factory=dict)  # text column position → its training categories, sorted
    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    read: list[str] | None = None  # the columns' names in the organization's file (None: no file was read)
    place: int = 0  # the organization's place in the run (0: Alice's), whose file these columns are

    @property
    def width(self) -> int:
        """How many prepared columns: the numeric ones, then one per category of each text column."""
        return sum(k == "numeric" for k in self.kinds) + sum(len(c) for c in self.categories.values())

    @property
    def columns(self) -> list[str]:
        """The prepared columns' names: the numeric columns', then ``column=category`` for each text column."""
        numeric = [self.raw[j] for j, k in enumerate(self.kinds) if k == "numeric"]
        return numeric + [f"{self.raw[j]}={v}" for j, cats in self.categories.items() for v in cats]

    def encode(self, block: np.ndarray, text: dict | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """The raw columns (``block``, NaN for a missing cell; ``text``: each text column's strings by position, as
        :func:`coded` takes them) as the prepared numbers, before scaling: float64, or written into ``out`` (rows ×
        :attr:`width`, e.g. a float32 slice of the whole table: each part is cast as it is written, with no full copy
        in between). The numbers scikit-learn's fitted imputers and encoder give (tested), from their fitted values:
        an empty cell takes its column's training mean or most frequent category, a category unseen in training
        encodes as zeros."""
        text = text if text is not None else {j: block[:, j] for j in self.categories}
        out = np.empty((block.shape[0], self.width)) if out is None else out
        numeric = [j for j, k in enumerate(self.kinds) if k == "numeric"]
        at = len(numeric)
        for start in range(0, block.shape[0] if numeric else 0, BLOCK):  # a block of rows at a time, in float64
            values = np.asarray(block[start : start + BLOCK][:, numeric], dtype=np.float64)
            filled = values if self.means is None else np.where(np.isnan(values), self.means, values)
            out[start : start + BLOCK, :at] = filled
        for j, categories in self.categories.items():  # each distinct string looked up once
            values, codes = coded(text[j])
            of_value = pc.index_in(values, value_set=pa.array(categories, pa.string())).fill_null(-1)
            fill = self.fills.get(j)
            empty = categories.index(fill) if fill in categories else -1  # a missing cell's category, or none
            index = np.append(of_value.to_numpy(zero_copy_only=False), empty)[codes]  # code -1: the last
            part, seen = out[:, at : at + len(categories)], np.flatnonzero(index >= 0)
            part[...] = 0
            part[seen, index[seen]] = 1
            at += len(categories)
        return out

    def scale(self, block: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Prepared columns z-scored with the training rows' statistics, as float32 (C order): each number as
        ``((block - mean) / std).astype(float32)`` computes it, a block of rows at a time (no float64 copy of the
        whole block); ``rows``: those rows only, in that order (a split's, taken whole from a C-order block as they
        are scaled: :func:`vcl.datamodules.rows.scaled_rows`)."""
        mean, std = np.asarray(self.mean, dtype=np.float64), np.asarray(self.std, dtype=np.float64)
        return scaled_rows(block, rows, mean, std)

    def prepare(self, block: np.ndarray, text: dict | None = None) -> torch.Tensor:
        """New rows (``block``, ``text`` as :meth:`encode` takes them) as the training rows were prepared: encoded,
        then scaled; a float32 tensor (C order)."""
        return torch.from_numpy(self.scale(self.encode(block, text)))

    def state(self) -> dict:
        """The fitted preparation as a checkpoint keeps it: names, numbers and tensors only."""

        def numbers(values):
            return None if values is None else torch.from_numpy(np.array(values, dtype=np.float64))

        return {
            "raw": list(self.raw), "kinds": list(self.kinds), "missing": self.missing, "read": list(self.read or []),
            "place": self.place,
            "means": numbers(self.means), "fills": [[j, v] for j, v in self.fills.items()],
            "categories": [[j, list(c)] for j, c in self.categories.items()],
            "mean": numbers(self.mean), "std": numbers(self.std),
        }  # fmt: skip

    @classmethod
    def from_state(cls, state, where: str) -> Preparation:
        """A preparation from what :meth:`state` kept, checked: anything else (a damaged or crafted checkpoint) is
        one sentence naming ``where`` it was read."""
        try:
            prep = cls._from_state(state)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise VCLInputError(
                f"{where} keeps no organization's preparation that vcl can use ({err}); predict with the run's "
                "training files as before, or train the run again."
            ) from None
        return prep

    @classmethod
    def _from_state(cls, state) -> Preparation:
        def texts(values, what: str) -> list[str]:
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise TypeError(f"its {what} are not a list of names")
            return list(values)

        def numbers(value, count: int, what: str):
            ok = isinstance(value, torch.Tensor) and value.dtype == torch.float64 and tuple(value.shape) == (count,)
            if not ok or not torch.isfinite(value).all():
                raise ValueError(f"its {what} are not {count} finite numbers")
            return value.numpy().copy()

        raw, kinds, read = texts(state["raw"], "columns"), texts(state["kinds"], "kinds"), texts(state["read"], "files")
        if len(kinds) != len(raw) or len(read) != len(raw) or not raw or any(k not in KINDS for k in kinds):
            raise ValueError("its columns, kinds and file columns do not match")
        if state["missing"] not in ("error", "drop", "impute"):
            raise ValueError(f"missing={state['missing']!r}")
        text = [j for j, k in enumerate(kinds) if k == "categorical"]
        categories = {int(j): texts(c, "categories") for j, c in state["categories"]}
        if sorted(categories) != text or any(not c or c != sorted(set(c)) for c in categories.values()):
            raise ValueError("its categories are not each text column's, sorted and distinct")
        fills = {int(j): v for j, v in state["fills"]}
        if not set(fills) <= set(text) or not all(isinstance(v, str) for v in fills.values()):
            raise ValueError("its fills are not text columns' categories")
        numeric = len(raw) - len(text)
        means = None if state["means"] is None else numbers(state["means"], numeric, "means")
        place = state["place"]
        if type(place) is not int or place < 0:
            raise ValueError(f"its place {place!r} is not an organization's")
        prep = cls(raw, kinds, state["missing"], means, fills, dict(sorted(categories.items())), read=read, place=place)
        prep.mean, prep.std = (
            numbers(state["mean"], prep.width, "means"),
            numbers(state["std"], prep.width, "deviations"),
        )
        if (prep.std <= 0).any():
            raise ValueError("a deviation is not positive")
        return prep


def prepare_group(
    block: np.ndarray, kinds: list[str], names: list[str], missing: str, train: np.ndarray, text: dict | None = None
):
    """One organization's columns as numbers: numeric columns (``block``'s, NaN for a missing cell; mean-imputed
    if ``missing`` is impute), then each text column's categories seen in the training rows as 0/1 columns named
    ``column=value`` (a category unseen there encodes as zeros). ``text``: each text column's strings by its
    position in the group (as :func:`coded` takes them; else ``block``'s own column). Returns (the prepared column
    names, the fitted :class:`Preparation`, not yet with its scaling); its :meth:`Preparation.encode` makes the
    numbers. The numeric columns' means are scikit-learn's ``SimpleImputer``'s;
    a text column's most frequent category (ties: the first in code-point order) and its sorted categories are what
    scikit-learn's ``SimpleImputer(strategy="most_frequent")`` and ``OneHotEncoder`` find (tested), counted over the
    codes of the column's one dictionary encoding, without a Python object per cell."""
    numeric = [j for j, k in enumerate(kinds) if k == "numeric"]
    cats = [j for j, k in enumerate(kinds) if k == "categorical"]
    text = {j: coded(t) for j, t in (text if text is not None else {j: block[:, j] for j in cats}).items()}
    impute = missing == "impute"
    fitted = Preparation(list(names), list(kinds), missing)
    if impute:  # the training rows' numeric columns, gathered once: for the check, then the means
        values = np.asarray(block[train][:, numeric] if numeric else np.empty((len(train), 0)), dtype=np.float64)
        empty = np.isnan(values)
        unfilled = dict(zip(numeric, empty.all(axis=0).tolist(), strict=True))
        for j in range(len(kinds)):
            if (text[j][1][train] < 0).all() if j in text else unfilled[j]:
                raise VCLInputError(
                    f"column {names[j]!r} has no value in its organization's training rows, so missing: impute has "
                    "nothing to impute from; fill some in or remove the column."
                )
        if numeric:  # SimpleImputer(strategy="mean")'s sums and counts, on the same array (tested)
            np.copyto(values, 0.0, where=empty)
            fitted.means = values.sum(axis=0) * 1.0 / (len(values) - empty.sum(axis=0))
    for j in cats:
        values, codes = text[j]
        codes = codes[train]  # its training rows: how many hold each distinct string
        counts = np.bincount(codes[codes >= 0], minlength=len(values))
        if impute:  # the most frequent (ties: the first in code-point order), which the missing cells take
            fitted.fills[j] = pc.min(values.filter(pa.array(counts == counts.max()))).as_py()
        seen = values.filter(pa.array(counts > 0))
        fitted.categories[j] = seen.take(pc.sort_indices(seen)).to_pylist()
    return fitted.columns, fitted


def coded(cells) -> tuple[pa.Array, np.ndarray]:
    """A text column as its distinct strings and each cell's code among them (-1 where missing): a dictionary array
    (the fill's: each distinct string once, trimmed, null where missing) by its values, equal ones one code; other
    cells (Arrow strings, null where missing, or Python strings, NaN or None where missing: :func:`as_text`)
    encoded; what it returned, as it is."""
    if isinstance(cells, tuple):
        return cells
    if isinstance(cells, pa.ChunkedArray):
        cells = cells.combine_chunks()
    if isinstance(cells, pa.DictionaryArray):
        distinct = as_text(cells.dictionary).dictionary_encode()
        remap = np.append(distinct.indices.fill_null(-1).to_numpy(zero_copy_only=False), -1)
        return distinct.dictionary, remap[cells.indices.fill_null(-1).to_numpy(zero_copy_only=False)]
    encoded = as_text(cells).dictionary_encode()
    return encoded.dictionary, encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)


def as_text(cells) -> pa.Array:
    """A text column's cells as one Arrow string array, null where missing: an Arrow array (or chunked array) as it
    is, or Python strings with NaN or None where missing."""
    if isinstance(cells, pa.ChunkedArray):
        cells = cells.combine_chunks()
    if isinstance(cells, pa.Array):
        return cells if cells.type == pa.string() else cells.cast(pa.string())
    return pa.array(np.asarray(cells, dtype=object), pa.string(), from_pandas=True)
