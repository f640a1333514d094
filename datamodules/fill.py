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
    text column that its policy lets through, its strings (an Arrow dictionary array: each distinct string once,
    trimmed, null where missing, and the rows' codes; :func:`vcl.datamodules.prepare.coded` reads it). ``kinds``: each
    column's kind in training (new rows: a text cell in a numeric column is refused). Float32 columns that nothing
    can refuse in any row go row by row (:func:`vcl.datamodules.rows.scatter`); the others are taken a column at a
    time (a text column through one dictionary encoding) and checked on the aligned rows."""
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
    cols = [_on_rows(col, rows) for col in whole]
    texts = [_each(text_cells, col) for col in cols]
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
            x = _each(as_float64, col)
            i = first_true(np.abs(x) > FLOAT32_MAX)  # infinities too; a NaN (missing) compares False
            if i is not None:
                refuse_cell(cell_text(own, c, int(rows[i])), own.path, c, keys[i])  # raises, naming the fix
            out[:, j] = x
    if missing == "error":
        for c, col in zip(feats, cols, strict=True):
            i = first_true(_each(missing_cells, col))
            if i is not None:
                refuse_cell(None, own.path, c, keys[i])  # raises, naming the fix
    text = {}
    for j, col, kind in zip(at, cols, kinds, strict=True):
        if kind == "categorical":  # its strings, trimmed, null where missing: each distinct one once, and the codes
            text[j] = _each(_trimmed, col) if isinstance(col, pa.DictionaryArray) else _trimmed(col)
            out[:, j] = np.nan
    return kinds, text


def _on_rows(col, rows):
    """A column's cells on the aligned rows: a text column as a dictionary array (one encoding of the whole column,
    a null its own entry; the aligned rows' codes and the strings they hold, no other), whose checks then run once a
    distinct string (:func:`_each`); anything else taken as it is."""
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        encoded = col.dictionary_encode(null_encoding="encode")
        codes = encoded.indices.to_numpy(zero_copy_only=False)[rows]
        used = np.bincount(codes, minlength=len(encoded.dictionary)) > 0
        remap = np.cumsum(used, dtype=np.int32) - 1
        return pa.DictionaryArray.from_arrays(pa.array(remap[codes]), encoded.dictionary.filter(pa.array(used)))
    return pc.take(col, rows)


def _each(function, cells):
    """``function`` of a column's cells (Arrow or NumPy values a cell; None stays None): of a dictionary array's
    distinct values once, each cell then given its value's; of other cells as they are. A dictionary array's result
    for a text column is a dictionary array again (its codes, the values' results)."""
    if not isinstance(cells, pa.DictionaryArray):
        return function(cells)
    result = function(cells.dictionary)
    if result is None or isinstance(result, np.ndarray):
        return None if result is None else result[cells.indices.to_numpy(zero_copy_only=False)]
    if pa.types.is_string(result.type):
        return pa.DictionaryArray.from_arrays(cells.indices, result)
    return result.take(cells.indices)


def _trimmed(col):
    """A text column's strings, trimmed, null where missing (Arrow's: no Python object per cell)."""
    trimmed = pc.utf8_trim_whitespace(col if pa.types.is_string(col.type) else col.cast("string"))
    return pc.if_else(missing_cells(col), pa.scalar(None, pa.string()), trimmed)
