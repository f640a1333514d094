"""A table's numbers moved a row at a time: an organization's columns are held row by row (float32, C order), so that
putting a file's row in its aligned place, or taking a split's row out of the table, touches one stretch of memory
and not one place a column.

Rows of a file and the aligned rows lie in unrelated orders (the aligned IDs are sorted; a file's are as its
organization wrote them), and so do a split's rows (a seeded permutation). Moving such rows column by column jumps
through memory once a cell; a row of 8 or 16 float32 numbers is one or two cache lines, so moving it whole jumps
once a row. The moves here, in blocks of :data:`BLOCK` rows whose float64 temporaries stay in the cache:

* :func:`scatter` (the fill): a file's columns, read in file order a block at a time, each block's rows written to
  their aligned places. No copy of the file's columns is made in between.
* :func:`scaled_rows` (a split): the rows of a split taken out of an organization's block and z-scored, exactly as
  ``((block[rows] - mean) / std).astype(float32)`` computes each number (in float64, then rounded once).
* :func:`column_values` (the training statistics): the training rows' columns, a group of columns gathered by one
  sweep of the rows.
"""

from __future__ import annotations

import numpy as np

BLOCK = 1 << 16  # rows at once: a block of 16 float64 columns is 8 MiB


def as_rows(a: np.ndarray) -> np.ndarray:
    """A C-contiguous 2-D array's rows as one-dimensional items (a view): NumPy then moves a row with one copy."""
    return a.view(np.dtype((np.void, a.shape[1] * a.itemsize))).reshape(a.shape[0])


def places_of(rows: np.ndarray, count: int) -> np.ndarray:
    """For each of ``count`` rows in file order, its place among the aligned ``rows`` (file row per aligned row,
    each at most once), or -1 where it is not aligned."""
    places = np.full(count, -1, dtype=np.int64 if len(rows) >= 2**31 else np.int32)
    places[rows] = np.arange(len(rows), dtype=places.dtype)
    return places


def scatter(columns: list, places: np.ndarray, out: np.ndarray, at: list[int]) -> None:
    """Write ``columns`` (one number a row, file order: NumPy arrays, or Arrow arrays whose nulls read as NaN) to
    the C-order ``out``'s columns ``at``, each file row to its row ``places[i]`` of ``out`` (-1: not written), whole
    rows at a time: its other columns are written NaN (the caller fills them after). File rows are read in order, a
    block at a time."""
    if not out.flags.c_contiguous:
        raise ValueError("scatter writes whole rows of a C-order array")
    block = np.full((min(BLOCK, len(places)), out.shape[1]), np.nan, dtype=out.dtype)
    target = as_rows(out)
    for start in range(0, len(places), BLOCK):
        stop = min(start + BLOCK, len(places))
        for j, column in zip(at, columns, strict=True):
            block[: stop - start, j] = column[start:stop]
        where = places[start:stop]
        kept = where >= 0
        target[where[kept]] = as_rows(block)[: stop - start][kept]


def column_values(block: np.ndarray, rows: np.ndarray, group: int = 8):
    """Each column of ``block``'s ``rows`` (in that order) as one contiguous array: (its index, its values), in
    column order, each valid until the next is asked for (a buffer's row). From a C-order block, ``group`` columns
    at a time are gathered by one sweep of the rows (blocks of rows, transposed in the cache), not one a column."""
    if not block.flags.c_contiguous:
        yield from ((j, block[:, j][rows]) for j in range(block.shape[1]))
        return
    buffer = np.empty((min(group, block.shape[1]), len(rows)), dtype=block.dtype)  # a row of it: one column's
    for first in range(0, block.shape[1], group):
        last = min(first + group, block.shape[1])
        for start in range(0, len(rows), BLOCK):
            stop = min(start + BLOCK, len(rows))
            buffer[: last - first, start:stop] = block[rows[start:stop], first:last].T
        yield from ((first + j, buffer[j]) for j in range(last - first))


def scaled_rows(block: np.ndarray, rows: np.ndarray | None, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """``block``'s ``rows`` (all, in order, if None) z-scored with ``mean`` and ``std`` as float32 (C order): each
    number as ``((block[rows] - mean) / std).astype(float32)`` gives it, a block of rows at a time."""
    count = block.shape[0] if rows is None else len(rows)
    out = np.empty((count, block.shape[1]), dtype=np.float32)
    rowwise = block.flags.c_contiguous
    for start in range(0, count, BLOCK):
        stop = min(start + BLOCK, count)
        if rows is None:
            part = block[start:stop]
        elif rowwise:
            part = np.take(as_rows(block), rows[start:stop]).view(block.dtype).reshape(stop - start, -1)
        else:
            part = block[rows[start:stop]]
        np.divide(np.subtract(part, mean, dtype=np.float64), std, out=out[start:stop], casting="same_kind")
    return out


def all_finite(block: np.ndarray) -> bool:
    """Whether every number of ``block`` is finite (a block of rows at a time: no full array of booleans)."""
    return all(np.isfinite(block[start : start + BLOCK]).all() for start in range(0, block.shape[0], BLOCK))
