"""A file's feature columns on the aligned rows, as float32 numbers (NaN where missing), checked: the fill of
:func:`vcl.datamodules.csv_files.load_csv_organizations` and of new rows (``train.py predict``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from vcl.datamodules.reading import (
    FLOAT32_MAX,
    OwnFile,
    as_float64,
    cell_text,
    column_of,
    first_true,
    missing_cells,
    refuse_cell,
    text_cells,
)
from vcl.datamodules.rows import places_of, scatter

from vcl.errors import VCLInputError


def fill_columns(own: OwnFile, feats: list[str], rows, keys, policy: tuple[str, str], out: np.ndarray, kinds=None):
    """One file's feature columns on the aligned ``rows`` (file row per aligned row; ``keys`` their IDs) into
    ``out`` (aligned rows × ``feats``, C order) as float32, NaN where missing; returns each column's kind and, for a
    text column that its policy lets through, its strings (an Arrow string array, null where missing). ``kinds``: each
    column's kind in training (new rows: a text cell in a numeric column is refused). Float32 columns that nothing
    can refuse in any row go row by row (:func:`vcl.datamodules.rows.scatter`); the others are taken a column at a
    time and checked on the aligned rows."""
    whole = [column_of(own, c) for c in feats]
    plain = [j for j, col in enumerate(whole) if _plain(col, policy[1], None if kinds is None else kinds[j])]
    if plain:
        columns = [whole[j].to_numpy() if whole[j].null_count == 0 else whole[j] for j in plain]  # NaN where null
        scatter(columns, places_of(rows, len(whole[plain[0]])), out, plain)  # the others: NaN, filled next
    rest = sorted(set(range(len(feats))) - set(plain))
    found, text = _taken(own, [feats[j] for j in rest], [whole[j] for j in rest], rows, keys, policy, out,
                         rest, None if kinds is None else [kinds[j] for j in rest])  # fmt: skip
    seen = dict.fromkeys(plain, "numeric") | dict(zip(rest, found, strict=True))
    return [seen[j] for j in range(len(feats))], text


def _plain(col, missing: str, kind: str | None) -> bool:
    """Whether a column's cells go to the table as they are: float32 numbers (every value fits: ``reading.narrowed``),
    a numeric column in training (``kind``), without a missing cell anywhere in its file if missing ones are refused."""
    if not pa.types.is_float32(col.type) or kind not in (None, "numeric"):
        return False
    return missing != "error" or (col.null_count == 0 and not pc.any(pc.is_nan(col)).as_py())


def _taken(own: OwnFile, feats: list[str], whole: list, rows, keys, policy, out: np.ndarray, at: list[int], kinds):
    """:func:`fill_columns` for columns taken on the aligned rows one at a time (text, integers, missing cells refused),
    each checked there: their kinds, and their text columns' strings by their place in ``out`` (``at``)."""
    categorical, missing = policy
    cols = [pc.take(col, rows) for col in whole]
    texts = [text_cells(col) for col in cols]
    seen = ["categorical" if t is not None and pc.any(t).as_py() else "numeric" for t in texts]
    kinds = seen if kinds is None else kinds
    for c, col, t, kind, found in zip(feats, cols, texts, kinds, seen, strict=True):
        if (kind, found) == ("numeric", "categorical") and kinds is not seen:  # new rows: training read numbers
            i = first_true(t)
            raise VCLInputError(
                f"{own.what}, column {c!r}, ID {keys[i]!r}: {col[i].as_py()!r} is not a number, but its organization "
                "trained on numbers in this column; give a number (or leave the cell empty with data.missing: impute)."
            )
        if kind == "categorical" and categorical == "error":
            i = first_true(t)
            refuse_cell(col[i].as_py(), own.path, c, keys[i])  # raises, naming the fix
    for j, c, col, kind in zip(at, feats, cols, kinds, strict=True):
        if kind == "numeric" and pa.types.is_float32(col.type):  # every value fits (reading.narrowed): as it is
            out[:, j] = col.to_numpy(zero_copy_only=False)
        elif kind == "numeric":  # checked, then written into its column of ``out`` (one column in float64 at a time)
            x = as_float64(col)
            i = first_true(np.abs(x) > FLOAT32_MAX)  # infinities too; a NaN (missing) compares False
            if i is not None:
                refuse_cell(cell_text(own, c, int(rows[i])), own.path, c, keys[i])  # raises, naming the fix
            out[:, j] = x
    if missing == "error":
        for c, col in zip(feats, cols, strict=True):
            i = first_true(missing_cells(col))
            if i is not None:
                refuse_cell(None, own.path, c, keys[i])  # raises, naming the fix
    text = {}
    for j, col, kind in zip(at, cols, kinds, strict=True):
        if kind == "categorical":  # its strings, trimmed, null where missing (Arrow's: no Python object per cell)
            trimmed = pc.utf8_trim_whitespace(col.cast("string"))
            text[j] = pc.if_else(missing_cells(col), pa.scalar(None, pa.string()), trimmed)
            out[:, j] = np.nan
    return kinds, text
