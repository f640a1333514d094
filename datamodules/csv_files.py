"""CSV per organization: each organization's own file, rows aligned by an ID column (the IDs that every file
holds), text columns and missing values handled by the run's policies, one sentence per problem."""

from __future__ import annotations

import collections
import csv
import io
import math
from pathlib import Path

import numpy as np
from vcl.datamodules.table import Table, _finish

from vcl.errors import VCLInputError, regular_file


def _read_csv(path: Path, id_column: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    """A CSV file's header and its rows by ID: UTF-8 text (a byte-order mark is allowed), one row per ID."""
    regular_file(path, "csv file", "check the path in csv_files")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise VCLInputError(f"csv file {path} is not UTF-8 text; save it as UTF-8 CSV.") from None
    if not text.strip():
        raise VCLInputError(f"csv file {path} is empty; it needs a header row and one row per ID.")
    if "\0" in text:
        raise VCLInputError(f"csv file {path} holds NUL bytes, so it is not a text CSV; export it as UTF-8 CSV.")
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = list(reader.fieldnames or [])
        if any(c is None or not c.strip() for c in header):
            raise VCLInputError(f"csv file {path} has a column with no name in its header; name every column.")
        twice = next((c for c, n in collections.Counter(header).items() if n > 1), None)
        if twice is not None:
            raise VCLInputError(f"csv file {path} names the column {twice!r} twice; give each column its own name.")
        if id_column not in header:
            raise VCLInputError(
                f"csv file {path} has no ID column {id_column!r}; add it or set data.id_column to its name."
            )
        rows: dict[str, dict[str, str]] = {}
        for row in reader:
            key = row[id_column]
            if key in (None, ""):
                raise VCLInputError(f"csv file {path} has a row with a missing {id_column!r}; fill in every ID.")
            if key in rows:
                raise VCLInputError(f"csv file {path} repeats ID {key!r}; each ID must appear once per file.")
            rows[key] = row
    except csv.Error as err:
        raise VCLInputError(f"csv file {path} is not valid CSV ({err}); export it as UTF-8 CSV.") from None
    if not rows:
        raise VCLInputError(f"csv file {path} has a header but no rows; add one row per ID.")
    return [c for c in header if c != id_column], rows


CATEGORICAL = ("error", "onehot")  # a text column: refuse it, or one-hot encode it (fitted on training rows)
MISSING = ("error", "drop", "impute")  # a missing value: refuse it, drop its row everywhere, or impute it


def _missing(value: str | None) -> bool:
    """An empty cell, or one that reads as NaN."""
    if value is None or value.strip() == "":
        return True
    try:
        return math.isnan(float(value))
    except ValueError:
        return False


def _number(value: str | None, path: Path, column: str, key: str) -> float:
    try:
        x = float(value) if value not in (None, "") else math.nan
    except ValueError:
        raise VCLInputError(
            f"csv file {path}, column {column!r}, ID {key!r}: {value!r} is not a number; features must be numeric, "
            "or set data.categorical: onehot for that file."
        ) from None
    if math.isinf(x):
        raise VCLInputError(
            f"csv file {path}, column {column!r}, ID {key!r}: {value.strip()!r} is infinite; give a finite number."
        )
    if abs(x) > FLOAT32_MAX:
        raise VCLInputError(
            f"csv file {path}, column {column!r}, ID {key!r}: {value.strip()!r} is beyond float32's range (3.4e38), "
            "which the models compute in; rescale the column."
        )
    if not math.isfinite(x):
        raise VCLInputError(
            f"csv file {path}, column {column!r}, ID {key!r} is missing or NaN; fill it in, or set data.missing: drop "
            "(or impute) for that file."
        )
    return x


def _complete(row: dict[str, str], columns: list[str]) -> bool:
    return not any(_missing(row.get(c)) for c in columns)


def csv_ids(path, id_column="id", drop_incomplete=False, label_column="label") -> list[str]:
    """The IDs in one organization's CSV file (what it offers for row alignment; no feature value); with
    ``drop_incomplete`` only those of its rows without a missing value (``missing: drop``)."""
    header, rows = _read_csv(Path(path), id_column)
    empty_column(Path(path), header, rows, label_column)
    return [key for key, row in rows.items() if not drop_incomplete or _complete(row, header)]


FLOAT32_MAX = float(np.finfo(np.float32).max)  # the models compute in float32
MIN_SHARED = 3  # aligned rows a run needs: two to train on, one to test


def shared_ids(id_lists: list[list[str]], id_column="id", dropped: bool = False) -> list[str]:
    """The IDs every organization holds, sorted: the aligned rows, in the order every party uses. ``dropped``:
    the lists hold only rows without a missing value (``missing: drop``)."""
    shared = set(id_lists[0])
    for ids in id_lists[1:]:
        shared &= set(ids)
    after = " once rows with a missing value are dropped (data.missing: drop)" if dropped else ""
    if not shared:
        raise VCLInputError(
            f"the csv files share no value of {id_column!r}{after}; they must describe the same people."
        )
    if len(shared) < MIN_SHARED:
        shown = ", ".join(repr(k) for k in sorted(shared))
        raise VCLInputError(
            f"the csv files share only {len(shared)} value(s) of {id_column!r} ({shown}){after}; a run needs at "
            f"least {MIN_SHARED} shared rows (2 to train on, 1 to test), so align more rows."
        )
    return sorted(shared)


def empty_column(path: Path, header: list[str], rows: dict[str, dict[str, str]], label_column: str) -> None:
    """One sentence for a feature column without a value in any row: nothing can fill it, and dropping the rows
    that miss it would drop them all."""
    for c in header:
        if c != label_column and all(_missing(row.get(c)) for row in rows.values()):
            raise VCLInputError(
                f"csv file {path}, column {c!r} has no value in any row; remove the column or fill it in."
            )


def csv_policies(categorical, missing, count: int) -> list[tuple[str, str]]:
    """(categorical, missing) for each of ``count`` CSV organizations: one value for all, or one each."""
    out = []
    for key, values, allowed in (("categorical", categorical, CATEGORICAL), ("missing", missing, MISSING)):
        values = list(values)
        if len(values) not in (1, count):
            raise VCLInputError(f"{key} lists {len(values)} values for {count} csv files; give 1 or {count}.")
        for v in values:
            if v not in allowed:
                raise VCLInputError(f"{key}={v!r}; use one of {', '.join(allowed)}.")
        out.append(values * count if len(values) == 1 else values)
    return list(zip(*out, strict=True))


def _block(rows, ids, feats, path: Path, policy: tuple[str, str]) -> tuple[np.ndarray, list[str]]:
    """One file's feature cells on the rows ``ids``: numbers (float64), or, where the file's policy lets text
    categories or missing values through, an object array (NaN for a missing cell) and each column's kind."""
    categorical, missing = policy
    kinds = []
    for c in feats:
        values = [rows[key][c] for key in ids]
        text = next((v for v in values if not _missing(v) and _maybe_float(v) is None), None)
        if text is not None and categorical == "error":
            _number(text, path, c, next(k for k in ids if rows[k][c] == text))  # raises, naming the fix
        kinds.append("categorical" if text is not None else "numeric")
    for c, kind in zip(feats, kinds, strict=True):
        key = next((k for k in ids if kind == "numeric" and _out_of_range(rows[k][c])), None)
        if key is not None:
            _number(rows[key][c], path, c, key)  # raises, naming the fix
    if missing == "error":
        for c in feats:
            key = next((k for k in ids if _missing(rows[k][c])), None)
            if key is not None:
                _number(rows[key][c], path, c, key)  # raises, naming the fix
    if all(k == "numeric" for k in kinds) and missing == "error":
        return np.array([[_number(rows[key][c], path, c, key) for c in feats] for key in ids], dtype=np.float64), kinds
    block = np.empty((len(ids), len(feats)), dtype=object)
    for i, key in enumerate(ids):
        for j, (c, kind) in enumerate(zip(feats, kinds, strict=True)):
            v = rows[key][c]
            block[i, j] = np.nan if _missing(v) else (v.strip() if kind == "categorical" else float(v))
    return block, kinds


def load_csv_organizations(
    files,
    id_column="id",
    label_column="label",
    task=None,
    only=None,
    ids=None,
    categorical=("error",),
    missing=("error",),
) -> Table:
    """One CSV per organization, inner-joined on ``id_column``; the first file (Alice's) holds the label.

    ``only=k`` reads file k alone, on the rows ``ids`` (the shared IDs, from :func:`shared_ids`): what one
    party loads where parties run apart. Its table has that file's columns only, and Alice's labels only
    when k is 0 (another file's labels are zeros: it holds none). ``categorical`` / ``missing`` (one value, or
    one per file): a file may let text categories (``onehot``) or missing values (``drop``: its incomplete rows
    leave every party before the split; ``impute``) through, to be prepared on its own training rows.
    """
    paths = [Path(f) for f in files]
    if len(paths) < 1:
        raise VCLInputError(
            "data.dataset=csv needs data.csv_files: one CSV per organization, Alice's (with the label) first."
        )
    if task not in ("classification", "regression"):
        raise VCLInputError(f"data.dataset=csv needs data.task=classification or data.task=regression (got {task!r}).")
    if label_column == id_column:
        raise VCLInputError(
            f"data.label_column and data.id_column both name {id_column!r}; the label is a column of its own."
        )
    twice = next((p for k, p in enumerate(paths) if p.resolve() in [q.resolve() for q in paths[:k]]), None)
    if twice is not None:
        raise VCLInputError(f"data.csv_files lists {twice} twice; give each organization its own file.")
    policies = csv_policies(categorical, missing, len(paths))
    read = range(len(paths)) if only is None else [only]
    tables = {k: _read_csv(paths[k], id_column) for k in read}
    if 0 in tables and label_column not in tables[0][0]:
        raise VCLInputError(
            f"Alice's file {paths[0]} has no label column {label_column!r}; add it or set label_column."
        )
    for k, (header, _) in tables.items():
        if k > 0 and label_column in header:
            raise VCLInputError(
                f"csv file {paths[k]} also holds the label {label_column!r}; only Alice's (first) file may."
            )
    for k, (header, rows) in tables.items():
        if not [c for c in header if c != label_column]:
            raise VCLInputError(f"csv file {paths[k]} has no feature columns; every organization needs at least one.")
        empty_column(paths[k], header, rows, label_column)
    if ids is None:
        offered = [
            [key for key, row in rows.items() if policies[k][1] != "drop" or _complete(row, header)]
            for k, (header, rows) in tables.items()
        ]
        dropped = any(len(o) < len(tables[k][1]) for o, k in zip(offered, tables, strict=True))
        ids = shared_ids(offered, id_column, dropped)
    columns, groups, blocks, kinds, seen = [], [], [], [], set()
    for k, (header, rows) in tables.items():
        p = paths[k]
        feats = [c for c in header if c != label_column]
        missing_id = next((key for key in ids if key not in rows), None)
        if missing_id is not None:
            raise VCLInputError(
                f"csv file {p} has no row for ID {missing_id!r}; it changed since the rows were aligned, so run again."
            )
        groups.append(list(range(len(columns), len(columns) + len(feats))))
        for c in feats:
            name = f"{p.stem}.{c}" if c in seen else c
            seen.add(c)
            columns.append(name)
        block, block_kinds = _block(rows, ids, feats, p, policies[k])
        blocks.append(block)
        kinds += block_kinds
    prepared = any(b.dtype == object for b in blocks)
    X = np.hstack([b.astype(object) for b in blocks]) if prepared else np.hstack(blocks)
    if 0 not in tables:  # another organization's own file: its features, no labels
        table = Table(X, np.zeros(len(ids), dtype=np.int64), columns, task)
    else:
        table = _csv_labels(X, tables[0][1], ids, columns, paths[0], label_column, task)
    table.groups, table.group_names, table.ids = groups, [paths[k].stem for k in tables], ids
    if prepared:
        table.kinds, table.policies = kinds, [policies[k] for k in tables]
    return table


def _csv_labels(X, rows, ids, columns, path, label_column, task) -> Table:
    raw_labels = [rows[k][label_column] for k in ids]
    if any(v in (None, "") for v in raw_labels):
        raise VCLInputError(f"Alice's file {path} has empty labels in {label_column!r}; fill them in.")
    if task == "regression":
        y = np.array([_number(v, path, label_column, k) for v, k in zip(raw_labels, ids, strict=True)])
        return _finish(X, y, columns, task)
    numeric = [_maybe_float(v) for v in raw_labels]
    odd = next((k for v, k in zip(numeric, ids, strict=True) if v is not None and not math.isfinite(v)), None)
    if odd is not None:
        raise VCLInputError(
            f"Alice's file {path}, ID {odd!r}: the label {rows[odd][label_column]!r} is not a class; give class labels."
        )
    if all(v is not None for v in numeric) and any(v != int(v) for v in numeric):
        raise VCLInputError(
            f"label column {label_column!r} holds non-integer numbers but data.task=classification; "
            "use data.task=regression or class labels."
        )
    return _finish(X, np.array(raw_labels), columns, task, f"label column {label_column!r} in {path}")


def _out_of_range(v: str | None) -> bool:
    """Infinite, or beyond float32's range (infinite once the models read it)."""
    x = _maybe_float(v) if v is not None else None
    return x is not None and not math.isnan(x) and abs(x) > FLOAT32_MAX


def _maybe_float(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None
