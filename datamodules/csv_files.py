"""One file per organization — CSV or Parquet — rows aligned by an ID column (the IDs that every file holds), text
columns and missing values handled by the run's policies, one sentence per problem.

Each file is read and its columns checked by :mod:`vcl.datamodules.reading` (Apache Arrow, whole columns at a
time). The inner join on IDs is a hash join: one dictionary encoding of every file's IDs (Arrow's hash table), then
integer work in NumPy; a Parquet file's columns are read after its IDs have aligned the rows. A file's feature
columns go straight into a float32 array of its own on the aligned rows (NaN where a cell is missing); a text
column (``categorical: onehot``) stays a column of strings for its organization to encode. Where a check fails,
the sentence names the file, the column and the first offending ID in the aligned (sorted) order.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from vcl.datamodules.fill import fill_columns
from vcl.datamodules.ids import fixed_width_encoding, sorted_strings
from vcl.datamodules.reading import (
    FLOAT32_MAX,
    NUMBER,
    OwnFile,
    as_float64,
    checked_hint,
    column_of,
    complete_rows,
    empty_column,
    file_version,
    first_true,
    holds_every,
    keep_read,
    read_file,
    read_kept,
    refuse_cell,
    string_array,
    unique_ids,
)
from vcl.datamodules.table import Table

from vcl.engine import memory
from vcl.errors import VCLInputError

CATEGORICAL = ("error", "onehot")  # a text column: refuse it, or one-hot encode it (fitted on training rows)
MISSING = ("error", "drop", "impute")  # a missing value: refuse it, drop its row everywhere, or impute it
MIN_SHARED = 3  # aligned rows a run needs: two to train on, one to test


def in_threads(function, items: list, at_most: int | None = None) -> list:
    """``function`` over ``items`` on the machine's cores (Arrow's kernels release the GIL), ``at_most`` at once,
    results in order (an item's exception raised where its result would be)."""
    workers = min(len(items), os.cpu_count() or 1, at_most or len(items))
    if workers < 2:
        return [function(item) for item in items]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(function, items))


def csv_ids(path, id_column="id", drop_incomplete=False, label_column="label", keep=False) -> list[str]:
    """The IDs in one organization's file (what it offers for row alignment; no feature value); with
    ``drop_incomplete`` only those of its rows without a missing value (``missing: drop``). ``keep``: the file's
    load on the aligned rows comes next in this process (:func:`vcl.datamodules.reading.keep_read`)."""
    own = read_file(path, id_column, label_column)
    unique_ids(own.what, own.ids)
    empty_column(own, label_column)
    own.unique, ids = True, own.ids
    if drop_incomplete:
        complete = complete_rows(own)
        ids, own.listed = ids.filter(pa.array(complete)), np.flatnonzero(complete)
    if keep:
        keep_read(own, id_column, label_column)
    return ids.to_pylist()


def _near_miss(lists, id_column: str) -> str:
    """Why files that share no ID may still describe the same people: the IDs they would share if one way of
    writing them (surrounding spaces, case, leading zeros) were ignored, with one such ID from the first two files."""
    spellings = (
        ("surrounding spaces", pc.utf8_trim_whitespace),
        ("upper and lower case", pc.utf8_lower),
        ("leading zeros", lambda ids: pc.utf8_ltrim(ids, characters="0")),
    )
    for what, same in spellings:
        written = [same(ids) for ids in lists]
        present = np.ones(len(written[0]), dtype=bool)
        for other in written[1:]:
            present &= pc.is_in(written[0], value_set=other).to_numpy(zero_copy_only=False)
        if present.any():
            k = int(present.argmax())
            second = pc.index(written[1], written[0][k]).as_py()
            return (
                f"they would share {int(present.sum())} if {what} were ignored (e.g. {lists[0][k].as_py()!r} in "
                f"the first and {lists[1][second].as_py()!r} in the second): write each ID the same way in "
                "every file."
            )
    return "they must describe the same people."


def shared_ids(id_lists, id_column="id", dropped: bool = False, least: int = MIN_SHARED) -> list[str]:
    """The IDs every organization holds, sorted: the aligned rows, in the order every party uses (a hash join of
    the lists). ``dropped``: the lists hold only rows without a missing value (``missing: drop``); ``least``: the
    rows needed."""
    return aligned(id_lists, id_column=id_column, dropped=dropped, least=least)[0].to_pylist()


def encode_ids(id_lists) -> tuple:
    """Every list's IDs as codes of one dictionary encoding (one Arrow hash table over them all, the lists as chunks
    of one array: not copied into one): the distinct IDs, and each list's codes (file order). Equal IDs get equal
    codes across lists, so the rest is integer work. IDs all of one width take 64-bit keys (:mod:`.ids`)."""
    lists = [string_array(ids) for ids in id_lists]
    if (fixed := fixed_width_encoding(lists)) is not None:
        return fixed
    if sum(a.nbytes for a in lists) >= 2**31 - 2**20:  # beyond a string array's 32-bit offsets
        lists = [a.cast(pa.large_string()) for a in lists]
    chunks = iter(pa.chunked_array(lists, type=lists[0].type if lists else pa.string()).dictionary_encode().chunks)
    encoded = [next(chunks) if len(a) else None for a in lists]  # a chunk a list (not copied into one), bar empty ones
    dictionary = next((e.dictionary for e in encoded if e is not None), pa.array([], pa.string()))
    empty = np.zeros(0, dtype=np.int32)
    return dictionary, [empty if e is None else e.indices.to_numpy(zero_copy_only=False) for e in encoded]


def unique_in_each(owns: list[OwnFile]) -> tuple:
    """:func:`unique_ids` for every file, in their order, from one encoding of all their IDs, which it returns
    (:func:`encode_ids`, for :func:`aligned`)."""
    encoding = dictionary, codes = encode_ids([own.ids for own in owns])
    for own, c in zip(owns, codes, strict=True):
        if len(c) and np.bincount(c, minlength=len(dictionary)).max() > 1:
            unique_ids(own.what, own.ids)  # raises, naming its first repeat
    return encoding


def aligned(
    id_lists, offered=None, id_column="id", dropped=False, given=None, least=MIN_SHARED, encoding=None, hints=None
):
    """The rows every list shares, as (their IDs sorted, and each list's row of each of them).

    ``id_lists``: each organization's IDs (each unique), file order; ``offered``: for each, the rows it offers (a
    mask; ``missing: drop`` leaves out incomplete rows) or None for all; ``given``: the IDs to align on (the shared
    IDs a party is sent), instead of intersecting (each of them looked up in a list: Arrow's ``index_in``, unless
    ``hints`` holds for that list the rows of the given IDs, (IDs, rows), as the PSI's centre placed them, and the
    list's IDs on those rows, all offered, are the given ones: a gather and a comparison of bytes).
    Intersecting is a hash join: one dictionary encoding of all the lists (``encoding``, from :func:`encode_ids`,
    if made already), then integer work in NumPy. ``least``: the rows a run needs (new rows to predict need one)."""
    lists = [string_array(ids) for ids in id_lists]
    offered = offered or [None] * len(lists)
    if given is not None:
        base = string_array(given)

        def where(value_set) -> np.ndarray:  # each given ID's position among value_set's, -1 where it has none
            return pc.index_in(base, value_set=value_set).fill_null(-1).to_numpy(zero_copy_only=False)

        checked = [
            checked_hint(hint, base, ids, mask)
            for ids, mask, hint in zip(lists, offered, hints or [None] * len(lists), strict=True)
        ]
        looked_up = [k for k, hint in enumerate(checked) if hint is None]
        offers = [lists[k] if offered[k] is None else lists[k].filter(pa.array(offered[k])) for k in looked_up]
        for k, p in zip(looked_up, in_threads(where, offers), strict=True):
            rows = np.arange(len(lists[k])) if offered[k] is None else np.flatnonzero(offered[k])  # offer -> file
            checked[k] = rows[p] if (p >= 0).all() else np.where(p >= 0, rows[p], -1)
        return base, checked
    dictionary, codes = encoding or encode_ids(lists)
    held = np.zeros(len(dictionary), dtype=np.int32)  # how many lists offer each ID
    for c, mask in zip(codes, offered, strict=True):
        held[c if mask is None else c[mask]] += 1
    shared = np.flatnonzero(held == len(lists))
    after = " once rows with a missing value are dropped (data.missing: drop)" if dropped else ""
    if len(shared) == 0:
        offers = [ids if mask is None else ids.filter(pa.array(mask)) for ids, mask in zip(lists, offered, strict=True)]
        raise VCLInputError(f"the csv files share no value of {id_column!r}{after}; {_near_miss(offers, id_column)}")
    keys = dictionary.take(shared)
    if (fixed := sorted_strings(keys)) is not None:  # IDs of one width: sorted as integers
        order, keys = fixed
    else:
        order = pc.sort_indices(keys).to_numpy(zero_copy_only=False)
        keys = keys.take(order)
    shared = shared[order]
    if len(shared) < least:
        shown = ", ".join(repr(k) for k in keys.to_pylist())
        raise VCLInputError(
            f"the csv files share only {len(shared)} value(s) of {id_column!r} ({shown}){after}; a run needs at "
            f"least {MIN_SHARED} shared rows (2 to train on, 1 to test), so align more rows."
        )

    def file_rows(c: np.ndarray) -> np.ndarray:  # each shared ID's row in the list whose codes are c
        row_of = np.full(len(dictionary), -1, dtype=np.int32 if len(c) < 2**31 else np.int64)
        row_of[c] = np.arange(len(c))
        return row_of[shared]

    return keys, [file_rows(c) for c in codes]


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


_AHEAD: dict = {}  # what read_ahead started: its call's key -> a Future of its table


def _ahead_key(files, id_column, label_column, task, categorical, missing) -> tuple:
    """A call's arguments and each file's identity and version (device, inode, size, modification time): a file
    changed since its read began is read again."""
    paths = [Path(f).absolute() for f in files]
    names, versions = tuple(map(str, paths)), tuple(map(file_version, paths))
    return names, versions, id_column, label_column, task, tuple(categorical), tuple(missing)


def read_ahead(files, id_column="id", label_column="label", task=None, categorical=("error",), missing=("error",)):
    """Begin :func:`load_csv_organizations` of these files in a thread of its own; the call with the same arguments
    then takes its table (or raises its sentence) instead of reading again. The command line starts it before it
    imports torch and Lightning (seconds of one core), which Arrow's reading and hashing (no GIL) overlap; Arrow's
    own modules are imported here, before the thread starts. :func:`forget_read_ahead` drops a read nobody took."""
    import pyarrow.csv  # noqa: F401

    key = _ahead_key(files, id_column, label_column, task, categorical, missing)
    if key in _AHEAD:
        return
    if any(Path(f).suffix.lower() in (".parquet", ".pq") for f in files):
        import pyarrow.parquet  # noqa: F401
    future = _AHEAD[key] = Future()

    def read() -> None:
        try:
            future.set_result(_load(files, id_column, label_column, task, categorical=categorical, missing=missing))
        except BaseException as err:  # its sentence, raised where the table is taken
            future.set_exception(err)

    threading.Thread(target=read, name="vcl-read-ahead", daemon=True).start()


def forget_read_ahead() -> None:
    """Drop reads begun by :func:`read_ahead` that no call took (their memory goes when their thread ends)."""
    _AHEAD.clear()


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
    """One file (CSV or Parquet) per organization, inner-joined on ``id_column``; the first (Alice's) holds the label.
    A read begun by :func:`read_ahead` with the same arguments (``only`` and ``ids`` unset) is taken, not repeated.

    ``only=k`` reads file k alone, on the rows ``ids`` (the shared IDs, from :func:`shared_ids`): what one
    party loads where parties run apart. Its table has that file's columns only, and Alice's labels only
    when k is 0 (another file's labels are zeros: it holds none). ``categorical`` / ``missing`` (one value, or
    one per file): a file may let text categories (``onehot``) or missing values (``drop``: its incomplete rows
    leave every party before the split; ``impute``) through, to be prepared on its own training rows.
    The features come as each file's float32 array (``Table.parts``), filled in place, file by file.
    """
    if only is None and ids is None and _AHEAD:
        future = _AHEAD.pop(_ahead_key(files, id_column, label_column, task, categorical, missing), None)
        if future is not None:
            return future.result()
    return _load(files, id_column, label_column, task, only, ids, categorical, missing)


def _load(files, id_column, label_column, task, only=None, ids=None, categorical=("error",), missing=("error",)):
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
    owns = {k: (read_file if ids is None else read_kept)(paths[k], id_column, label_column) for k in read}
    memory.mark("read")
    encoding = None  # the IDs' one encoding, for the join (none where the rows are given)
    if ids is None:
        encoding = unique_in_each(list(owns.values()))
    else:
        in_threads(lambda own: unique_ids(own.what, own.ids), [own for own in owns.values() if not own.unique])
    if 0 in owns and label_column not in owns[0].header:
        raise VCLInputError(
            f"Alice's file {paths[0]} has no label column {label_column!r}; add it or set label_column."
        )
    for k, own in owns.items():
        if k > 0 and label_column in own.header:
            raise VCLInputError(f"{own.what} also holds the label {label_column!r}; only Alice's (first) file may.")
    for own in owns.values():
        if not own.features(label_column):
            raise VCLInputError(f"{own.what} has no feature columns; every organization needs at least one.")
        if own.table is not None:  # a Parquet file's once its columns are read (``unread``), as they fill
            empty_column(own, label_column)
    unread = {k for k, own in owns.items() if own.table is None}
    offered = [complete_rows(own) if policies[k][1] == "drop" else None for k, own in owns.items()]
    dropped = any(m is not None and not m.all() for m in offered)
    ids_of = [own.ids for own in owns.values()]
    hints = [own.rows_hint for own in owns.values()]
    keys, file_rows = aligned(ids_of, offered, id_column, dropped, ids, encoding=encoding, hints=hints)
    encoding = ids_of = hints = None  # its codes and distinct IDs (0.46 GB at 10^7 rows of 8 files) go, and the
    for own in owns.values():  # files' own IDs (1.1 GB there; the aligned ones are ``keys``), before the columns fill
        own.ids = None
    pa.default_memory_pool().release_unused()
    memory.mark("align")
    columns, groups, kinds, text, seen = [], [], [], {}, set()
    for (k, own), rows in zip(owns.items(), file_rows, strict=True):
        holds_every(own, rows, keys)
        feats = own.features(label_column)
        groups.append(list(range(len(columns), len(columns) + len(feats))))
        for c in feats:
            columns.append(f"{paths[k].stem}.{c}" if c in seen else c)
            seen.add(c)
    if 0 in owns:
        labels = pc.take(column_of(owns[0], label_column), file_rows[0])

    # one file at a time: two at once (on both cores) took ~0.3 s less at 10^6 rows and ~0.15 GB more memory
    parts = [np.empty((len(keys), len(g)), dtype=np.float32) for g in groups]  # each file's columns, row by row
    for (k, own), rows, group, part in zip(owns.items(), file_rows, groups, parts, strict=True):
        if k in unread:
            empty_column(own, label_column)
        block_kinds, block_text = fill_columns(own, own.features(label_column), rows, _Keys(keys), policies[k], part)
        kinds += block_kinds
        text.update({group[0] + j: t for j, t in block_text.items()})  # by the column's place in the table
        own.table = None  # the file's columns are in its part now: its memory goes, handed back to the system
        pa.default_memory_pool().release_unused()  # at once (Arrow's pool keeps freed memory for reuse otherwise)
    if 0 not in owns:  # another organization's own file: its features, no labels
        table = Table(None, np.zeros(len(keys), dtype=np.int64), columns, task)
    else:
        table = _labels(None, labels, _Keys(keys), columns, paths[0], label_column, task)
    table.groups, table.group_names, table.parts = groups, [paths[k].stem for k in owns], parts
    table.ids = keys if ids is None else ids  # an Arrow array (a list of 10^6 Python strings held ~60 MB more)
    table.raw_columns = [own.features(label_column) for own in owns.values()]
    if text or any(p[1] != "error" for p in (policies[k] for k in owns)):
        table.kinds, table.policies, table.text = kinds, [policies[k] for k in owns], text
    owns, labels = {}, None
    memory.mark("fill")
    return table


class _Keys:
    """The aligned IDs by position, as Python strings (for error sentences only)."""

    def __init__(self, keys):
        self.keys = keys

    def __getitem__(self, i: int) -> str:
        return self.keys[int(i)].as_py()


def _labels(X, labels, keys, columns, path, label_column, task) -> Table:
    """Alice's label column on the aligned rows: numbers (regression) or classes (classification: the labels as
    the file spells them, sorted as text, numbered from 0; each distinct label checked once, the rows its code)."""

    codes = None
    if pa.types.is_dictionary(labels.type):  # (a Parquet category column) its dictionary may hold labels no row has
        labels = labels.dictionary_decode()
    if task == "classification":  # the distinct labels (first seen first) and each row's: the checks run on them
        encoded = labels.dictionary_encode()
        labels, codes = encoded.dictionary, encoded.indices
    text = labels if pa.types.is_string(labels.type) else labels.cast(pa.string())
    empty = pc.or_(pc.is_null(text), pc.equal(text, "")).fill_null(True)
    if pc.any(empty).as_py() or (codes is not None and codes.null_count):
        raise VCLInputError(f"Alice's file {path} has empty labels in {label_column!r}; fill them in.")
    number = pc.match_substring_regex(text, NUMBER)
    if task == "regression":
        bad = first_true(pc.invert(number))
        if bad is not None:
            refuse_cell(text[bad].as_py(), path, label_column, keys[bad])
        y = as_float64(text)
        bad = first_true(~np.isfinite(y) | (np.abs(np.nan_to_num(y)) > FLOAT32_MAX))
        if bad is not None:
            refuse_cell(text[bad].as_py(), path, label_column, keys[bad])
        return Table(X, y.reshape(-1, 1), columns, task, 1)
    codes = codes.to_numpy(zero_copy_only=False)
    numeric = pc.all(number).as_py()
    odd = first_true(pc.and_(number, pc.match_substring_regex(text, r"(?i)inf|nan")))
    if odd is not None:  # the first such label seen is the first row's that holds one
        row = first_true(codes == odd)
        raise VCLInputError(
            f"Alice's file {path}, ID {keys[row]!r}: the label {text[odd].as_py()!r} is not a class; give class labels."
        )
    if numeric:
        values = as_float64(text)
        if np.any(values != np.round(values)):
            raise VCLInputError(
                f"label column {label_column!r} holds non-integer numbers but data.task=classification; "
                "use data.task=regression or class labels."
            )
    names = text.to_pylist()
    order = sorted(range(len(names)), key=names.__getitem__)
    if len(names) < 2:
        raise VCLInputError(
            f"label column {label_column!r} in {path} holds a single class ({names[0]!r}); classification needs at "
            "least two classes, or use data.task=regression."
        )
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    y = rank[codes]
    return Table(X, y, columns, task, len(names), classes=[names[i] for i in order])


def load_new_rows(files, trained, id_column="id", label_column="label", only=None, ids=None):
    """New people's rows, one file per organization in training's order (``train.py predict``): each file read and
    checked as in training, its columns those of the training file (any order; Alice's label column optional and
    unread), their kinds as in training, rows aligned by ID as in training (``ids``: the aligned IDs a party is
    sent). ``trained``: each file's ``(feature columns, kinds, (categorical, missing))`` from training (only file
    ``only``'s when one party reads its own; None for a file read for its IDs alone). Returns (the aligned IDs,
    {file index: (float32 block, NaN where missing; its text columns' strings by position)}, for each file whose
    columns were asked for)."""
    paths = [Path(f) for f in files]
    read = range(len(paths)) if only is None else [only]
    owns = {k: read_file(paths[k], id_column, label_column) for k in read}
    in_threads(lambda own: unique_ids(own.what, own.ids), list(owns.values()))
    for (k, own), columns in zip(owns.items(), trained, strict=True):
        if columns is None:
            continue
        feats, have = columns[0], own.features(label_column)
        lacking, extra = [c for c in feats if c not in have], [c for c in have if c not in feats]
        if k > 0 and label_column in own.header:
            extra.append(label_column)
        if lacking or extra:
            says = "; ".join(
                part for part in (lacking and f"it lacks {lacking}", extra and f"it has {extra} beside them") if part
            )
            raise VCLInputError(
                f"{own.what} holds other columns than its organization trained on ({says}); give it the training "
                f"file's columns {feats}."
            )
    offered = [complete_rows(own) if columns and columns[2][1] == "drop" else None for own, columns in zip(
        owns.values(), trained, strict=True)]  # fmt: skip
    keys, file_rows = aligned([own.ids for own in owns.values()], offered, id_column, False, ids, least=1)
    blocks = {}
    for (k, own), rows, columns in zip(owns.items(), file_rows, trained, strict=True):
        holds_every(own, rows, keys)
        if columns is None:
            continue
        feats, kinds, policy = columns
        block = np.empty((len(keys), len(feats)), dtype=np.float32)
        _, text = fill_columns(own, feats, rows, _Keys(keys), policy, block, kinds)
        blocks[k] = (block, text)
        own.table = None
        pa.default_memory_pool().release_unused()
    return keys.to_pylist(), blocks
