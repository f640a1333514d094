"""Reading one organization's file — CSV or Parquet — with Apache Arrow (``pyarrow``: its multi-threaded CSV reader
and its Parquet reader, the columnar engine both formats share), and the checks that run on its whole columns
(Arrow compute kernels and NumPy, never cell by cell): the header, the ID column, missing cells, text cells,
numbers beyond float32. Where a check fails, the sentence names the file, the column and an offending ID,
quoting the cell as the file spells it (read again, on that path only). Aligning the files' rows and turning their
columns into one float32 table is :mod:`vcl.datamodules.csv_files`.
"""

from __future__ import annotations

import csv
import io
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from vcl.errors import VCLInputError, regular_file

FLOAT32_MAX = float(np.finfo(np.float32).max)  # the models compute in float32
PARQUET = (".parquet", ".pq")
NAN_SPELLINGS = ["nan", "NaN", "NAN", "-nan", "-NaN", "+nan"]  # read as a missing value, as an empty cell is
NUMBER = r"(?i)^\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf|infinity|nan)\s*$"  # what float() reads
NAN_CELL = r"(?i)^\s*[+-]?nan\s*$"


def _kind(path: Path) -> str:
    return "parquet file" if path.suffix.lower() in PARQUET else "csv file"


@dataclass
class OwnFile:
    """One organization's file as read: its path, its columns but the ID (file order), its IDs (an Arrow string
    array, file order) and its columns (an Arrow table)."""

    path: Path
    header: list[str]
    ids: object  # pyarrow.Array of strings
    table: object  # pyarrow.Table; a Parquet file's columns are read when first asked for (:func:`columns`)
    version: object = None  # a Parquet file's version as its IDs were read: its columns must come from the same
    unique: bool = False  # its IDs were found unique already
    listed: object = None  # the file rows of the IDs it offered for alignment (None: every row), file order
    offer_rows: object = None  # the file row at each place of its PSI offer (its secret order; note_offer)
    rows_hint: object = None  # (the aligned IDs, the file row of each), as the PSI's centre placed them (use_places)

    @property
    def what(self) -> str:
        return f"{_kind(self.path)} {self.path}"

    def features(self, label_column: str) -> list[str]:
        return [c for c in self.header if c != label_column]


_KEPT: dict = {}  # a file read for the row alignment, for the load that follows: its path -> (its key, OwnFile)


def file_version(path: Path):
    """A file's identity and version (device, inode, size, modification time), or None if it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def keep_read(own: OwnFile, id_column: str, label_column: str) -> None:
    """Keep ``own``, read for the row alignment, for the load of the same file that follows it (a party's Setup
    after its half of the PSI; Alice's coordinator after hers): that load takes it instead of reading the file
    again, unless the file changed meanwhile. One per file."""
    path = own.path.absolute()
    _KEPT[path] = ((file_version(path), id_column, label_column), own)


def note_offer(path, id_column: str, label_column: str, order: np.ndarray) -> None:
    """With the kept read of ``path`` (:func:`keep_read`), which of its rows sits at each place of the PSI offer it
    made (``order``: the place's index among the IDs it offered), for the places the Setup brings back."""
    key, own = _KEPT.get(Path(path).absolute(), (None, None))
    if own is not None and key[1:] == (id_column, label_column):
        own.offer_rows = order if own.listed is None else own.listed[order]


def use_places(path, ids, places) -> None:
    """The places in its PSI offer of the aligned ``ids`` (sent with the Setup by Alice, who matched them) as a
    hint of the file rows the load takes, checked there against the IDs (:func:`vcl.datamodules.csv_files.aligned`):
    anything else than places of its offer, one per ID, is ignored, and the IDs are looked up instead."""
    _, own = _KEPT.get(Path(path).absolute(), (None, None))
    rows = getattr(own, "offer_rows", None)
    if rows is None or isinstance(ids, dict) or not isinstance(places, np.ndarray):
        return
    if (
        places.dtype.kind not in "iu"
        or places.ndim != 1
        or (len(places) and not 0 <= places.min() <= places.max() < len(rows))
    ):
        return  # one ID each and in order is checked_hint's to say
    own.rows_hint = (ids, rows[places])


def checked_hint(hint, base, ids, mask) -> np.ndarray | None:
    """A hint's rows (:func:`use_places`), if ``ids`` on them are the IDs ``base`` (the given ones, in order) and
    ``mask`` (the rows offered, or None: all) holds them all; else None."""
    if hint is None:
        return None
    hinted, rows = hint
    if hinted is not base and not string_array(hinted).equals(base):
        return None
    if len(rows) != len(base) or (len(rows) and (rows.min() < 0 or rows.max() >= len(ids))):
        return None
    if mask is not None and not mask[rows].all():
        return None
    return rows if ids.take(rows).equals(base) else None


def read_kept(path, id_column: str = "id", label_column: str = "label") -> OwnFile:
    """The file as :func:`keep_read` kept it (taken, so once), or read now (:func:`read_file`)."""
    path = Path(path)
    key, own = _KEPT.pop(path.absolute(), (None, None))
    if own is not None and key == (file_version(path.absolute()), id_column, label_column):
        return own
    return read_file(path, id_column, label_column)


def _check_header(what: str, header: list[str], id_column: str) -> None:
    if any(c is None or not str(c).strip() for c in header):
        raise VCLInputError(f"{what} has a column with no name in its header; name every column.")
    seen = set()
    for c in header:
        if c in seen:
            raise VCLInputError(f"{what} names the column {c!r} twice; give each column its own name.")
        seen.add(c)
    if id_column not in header:
        raise VCLInputError(f"{what} has no ID column {id_column!r}; add it or set data.id_column to its name.")


def _csv_options(id_column: str, label_column: str):
    """IDs and labels read as the file spells them; an empty or NaN cell of any other column is missing."""

    types = {c: pa.string() for c in (id_column, label_column)}
    return pacsv.ConvertOptions(column_types=types, strings_can_be_null=False, null_values=["", *NAN_SPELLINGS])


def read_file(path, id_column: str = "id", label_column: str = "label") -> OwnFile:
    """One organization's file (CSV: UTF-8 text, a byte-order mark allowed; or Parquet), one row per ID."""

    path = Path(path)
    what = f"{_kind(path)} {path}"
    regular_file(path, _kind(path), "check the path in csv_files")
    if path.suffix.lower() in PARQUET:  # its IDs now, its other columns when first asked for (:func:`columns`)
        version = file_version(path)
        try:
            file = pq.ParquetFile(path)  # one file: read_table would import pyarrow.dataset for it
            header = list(file.schema_arrow.names)
            _check_header(what, header, id_column)
            ids, table = file.read(columns=[id_column]).column(id_column), None
        except (pa.ArrowException, OSError) as err:
            raise VCLInputError(f"{what} is not a Parquet file we can read ({_first_line(err)}).") from None
        if ids.null_count:
            raise VCLInputError(f"{what} has a row with a missing {id_column!r}; fill in every ID.")
        ids = ids.cast(pa.string()) if not pa.types.is_string(ids.type) else ids
    else:
        header = _csv_header(path, what)
        _check_header(what, header, id_column)
        try:  # Arrow opens the file itself (a byte-order mark is skipped)
            table = pacsv.read_csv(str(path), convert_options=_csv_options(id_column, label_column))
        except pa.ArrowException as err:
            if "utf8" in str(err).lower() or "utf-8" in str(err).lower():  # a text cell of other bytes
                raise VCLInputError(f"{what} is not UTF-8 text; save it as UTF-8 CSV.") from None
            raise VCLInputError(f"{what} is not valid CSV ({_first_line(err)}); export it as UTF-8 CSV.") from None
        ids = table.column(id_column)
    if len(ids) == 0:
        raise VCLInputError(f"{what} has a header but no rows; add one row per ID.")
    if hasattr(ids, "combine_chunks"):  # one array (a lone chunk as it is)
        ids = ids.chunk(0) if ids.num_chunks == 1 else ids.combine_chunks()
    if pc.min(pc.binary_length(ids)).as_py() == 0:  # by length: a Python "" would make Arrow import pandas
        raise VCLInputError(f"{what} has a row with a missing {id_column!r}; fill in every ID.")
    header = [c for c in header if c != id_column]
    if table is None:
        return OwnFile(path, header, ids, None, version)
    return OwnFile(path, header, ids, narrowed(table.drop_columns([id_column])))  # the IDs are ``ids`` now


def columns(own: OwnFile):
    """A file's columns but its ID (an Arrow table). A Parquet file's are read here when first asked for: its IDs
    were read alone, so the rows are aligned before any file's columns are held (at 10^7 rows of 8 files, 2.6 GB
    less at the alignment's peak). One changed since its IDs were read is refused."""
    if own.table is None and own.version is not None:
        if file_version(own.path) != own.version:
            raise VCLInputError(f"{own.what} changed while it was read; run again once it is written.")
        try:
            own.table = narrowed(pq.ParquetFile(own.path).read(columns=own.header))
        except (pa.ArrowException, OSError) as err:
            raise VCLInputError(f"{own.what} is not a Parquet file we can read ({_first_line(err)}).") from None
        own.version = None  # read: let go as any file's columns are (``own.table = None``), not read again
    return own.table


def narrowed(table):
    """``table`` with each float64 column whose values all lie within float32's range as float32: the numbers the
    feature matrix takes from it (rounded as NumPy rounds them), in half the memory while the other files are read.
    A column with a value beyond that range (or an infinity) stays as read, for its sentence."""
    for i, field in enumerate(table.schema):
        if pa.types.is_float64(field.type):
            low, high = pc.min_max(table.column(i)).values()
            if high.as_py() is None or (-FLOAT32_MAX <= low.as_py() and high.as_py() <= FLOAT32_MAX):
                table = table.set_column(i, field.name, table.column(i).cast(pa.float32()))
    pa.default_memory_pool().release_unused()  # the float64 columns' memory, back to the system at once
    return table


def _csv_header(path: Path, what: str) -> list[str]:
    """A CSV file's header row, after the checks that need its bytes (mapped, not copied: a search for NUL is one
    pass of memchr): not empty, no NUL byte, a UTF-8 header."""

    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            raise VCLInputError(f"{what} is empty; it needs a header row and one row per ID.")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if len(data) <= 2**16 and not data[:].strip():
                raise VCLInputError(f"{what} is empty; it needs a header row and one row per ID.")
            if data.find(b"\0") >= 0:
                if _utf8(data[:]):
                    raise VCLInputError(f"{what} holds NUL bytes, so it is not a text CSV; export it as UTF-8 CSV.")
                raise VCLInputError(f"{what} is not UTF-8 text; save it as UTF-8 CSV.")
            start = 3 if data[:3] == b"\xef\xbb\xbf" else 0
            end = data.find(b"\n", start)
            line = data[start : len(data) if end < 0 else end]
    try:
        return next(csv.reader(io.StringIO(line.decode("utf-8"), newline="")))
    except UnicodeDecodeError:
        raise VCLInputError(f"{what} is not UTF-8 text; save it as UTF-8 CSV.") from None
    except (csv.Error, StopIteration) as err:
        raise VCLInputError(f"{what} is not valid CSV ({err}); export it as UTF-8 CSV.") from None


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]


def column_of(own: OwnFile, name: str):
    """A column as one Arrow array; a column with no value anywhere as nulls of type double. A column of several
    chunks (a CSV file's) is combined once: the file's table then holds it as one chunk for the next call."""

    table = columns(own)
    col = table.column(name)
    if col.num_chunks == 1:
        col = col.chunk(0)
    else:
        col = col.combine_chunks()
        own.table = table.set_column(table.schema.get_field_index(name), name, pa.chunked_array([col], col.type))
    return pa.nulls(len(col), pa.float64()) if pa.types.is_null(col.type) else col


def is_number_type(t) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def missing_cells(col):
    """Arrow booleans: the cell is missing (null, empty or blank, or a NaN)."""

    if pa.types.is_integer(col.type):  # no NaN
        return pc.is_null(col)
    if is_number_type(col.type):  # float32 and float64 as they are (no float64 copy), else as float64
        values = col if pa.types.is_float32(col.type) or pa.types.is_float64(col.type) else col.cast(pa.float64())
        return pc.or_(pc.is_null(values), pc.is_nan(values)).fill_null(True)
    text = col if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) else col.cast(pa.string())
    blank = pc.equal(pc.utf8_trim_whitespace(text), "")
    return pc.or_(pc.or_(blank, pc.match_substring_regex(text, NAN_CELL)), pc.is_null(text)).fill_null(True)


def text_cells(col):
    """Arrow booleans: a cell present that does not read as a number (None for a numeric column)."""

    if is_number_type(col.type):
        return None
    text = col if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) else col.cast(pa.string())
    number = pc.match_substring_regex(text, NUMBER)
    return pc.and_(pc.invert(number), pc.invert(missing_cells(col))).fill_null(False)


def as_float64(col) -> np.ndarray:
    """A column whose cells all read as numbers, as float64 (NaN where missing)."""

    if not is_number_type(col.type):
        text = col if pa.types.is_string(col.type) else col.cast(pa.string())
        text = pc.if_else(missing_cells(col), pa.scalar(None, pa.string()), pc.utf8_trim_whitespace(text))
        col = text.cast(pa.float64())
    return col.cast(pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)


def cell_text(own: OwnFile, column: str, row: int) -> str:
    """The cell of ``row`` (file order) in ``column`` as the file spells it (read again, on the error path)."""
    if own.path.suffix.lower() in PARQUET:
        return str(columns(own).column(column)[row].as_py())

    options = pacsv.ConvertOptions(column_types={column: pa.string()}, include_columns=[column])
    return pacsv.read_csv(str(own.path), convert_options=options).column(column)[row].as_py()


def refuse_cell(value, path: Path, column: str, key: str) -> None:
    """Raises the one sentence for a cell that is not a finite float32 number (``value`` as the file spells it)."""
    text = "" if value is None else str(value).strip()
    try:
        x = float(text) if text else float("nan")
    except ValueError:
        raise VCLInputError(
            f"{_kind(path)} {path}, column {column!r}, ID {key!r}: {value!r} is not a number; features must be "
            "numeric, or set data.categorical: onehot for that file."
        ) from None
    if x in (float("inf"), float("-inf")):
        raise VCLInputError(
            f"{_kind(path)} {path}, column {column!r}, ID {key!r}: {text!r} is infinite; give a finite number."
        )
    if abs(x) > FLOAT32_MAX:
        raise VCLInputError(
            f"{_kind(path)} {path}, column {column!r}, ID {key!r}: {text!r} is beyond float32's range (3.4e38), "
            "which the models compute in; rescale the column."
        )
    raise VCLInputError(
        f"{_kind(path)} {path}, column {column!r}, ID {key!r} is missing or NaN; fill it in, or set data.missing: "
        "drop (or impute) for that file."
    )


def empty_column(own: OwnFile, label_column: str) -> None:
    """One sentence for a feature column without a value in any row: nothing can fill it, and dropping the rows
    that miss it would drop them all. A value among a column's first rows settles it without reading the rest."""

    for c in own.features(label_column):
        col = column_of(own, c)
        if pc.all(missing_cells(col.slice(0, 4096))).as_py() and pc.all(missing_cells(col)).as_py():
            raise VCLInputError(f"{own.what}, column {c!r} has no value in any row; remove the column or fill it in.")


def complete_rows(own: OwnFile) -> np.ndarray:
    """Booleans, file order: the row has a value in every column (the label's included)."""
    complete = np.ones(len(own.ids), dtype=bool)
    for c in own.header:
        complete &= ~missing_cells(column_of(own, c)).to_numpy(zero_copy_only=False)
    return complete


def holds_every(own: OwnFile, rows: np.ndarray, keys) -> None:
    """One sentence if the file lacks a row for an aligned ID (``rows``: its row per ID, -1 where none)."""
    if (rows < 0).any():
        gone = keys[first_true(rows < 0)].as_py()
        raise VCLInputError(
            f"{own.what} has no row for ID {gone!r}; it changed since the rows were aligned, so run again."
        )


def string_array(ids):
    if isinstance(ids, pa.ChunkedArray):
        return ids.combine_chunks()
    if isinstance(ids, pa.Array):
        return ids
    return pa.array(list(ids), type=pa.string())


def unique_ids(what: str, ids) -> None:
    """One sentence for an ID its file lists twice (the first repeat, in file order): one dictionary encoding of
    the file's IDs (Arrow's hash table), integer work after."""
    ids = string_array(ids)
    encoded = ids.dictionary_encode()
    if len(encoded.dictionary) == len(ids):
        return
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    first = np.full(len(encoded.dictionary), len(codes))
    np.minimum.at(first, codes, np.arange(len(codes)))
    again = int(np.flatnonzero(first[codes] != np.arange(len(codes)))[0])
    raise VCLInputError(f"{what} repeats ID {ids[again].as_py()!r}; each ID must appear once per file.")


def first_true(mask) -> int | None:
    """The first True of an Arrow or NumPy boolean array, or None."""
    mask = mask if isinstance(mask, np.ndarray) else mask.to_numpy(zero_copy_only=False)
    hit = np.flatnonzero(mask)
    return int(hit[0]) if hit.size else None
