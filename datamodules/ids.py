"""IDs of one width (UUIDs, zero-padded numbers), encoded through 64-bit keys: Arrow's hash table on integers
instead of on text.

:func:`vcl.datamodules.csv_files.encode_ids` gives every file's IDs codes of one dictionary encoding. On text, Arrow
hashes and compares each ID's bytes in its hash table (the alignment of 8 × 10^7 UUIDs: 32.7 s on text in
``docs/records/2026-11-29f-cpu``, 24.5 s this way in ``docs/records/2026-11-29h-cpu``). When every ID of every file
has the same width in bytes, each is made one 64-bit key (its bytes themselves, up to 8; else a hash of its words, in
NumPy over all rows at once), Arrow encodes the keys, and each ID is then compared, byte for byte, with the one its
code names: equal everywhere, the codes and distinct IDs are those of the encoding on text (the same first-seen
order). Otherwise (IDs of several widths, or two different IDs that met on one key) the result is None and the
caller encodes the text as before.

:func:`sorted_strings` sorts strings of one width (the shared IDs, the order every party uses) as Arrow's
``sort_indices`` does, on integers: each byte position's bytes ranked among those it holds, the ranks of the first
positions one number (mixed radix, so the order of the numbers is that of the strings) beside the row's place in
the low bits of a 64-bit word, and NumPy sorts the words (the align step of 8 files of 10^7 rows: 21.6 s with Arrow's
sort of the text in ``docs/records/2026-11-29j-cpu``, 14.5 s this way in ``docs/records/2026-11-29k-cpu``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying by it mixes a word's bits upward (Fibonacci hashing)
START = 0x243F6A8885A308D3
BLOCK = 1 << 20  # rows compared at once (a block of gathered IDs, not a copy of every file's)


def fixed_width_encoding(lists: list[pa.Array]) -> tuple[pa.Array, list[np.ndarray]] | None:
    """(the distinct IDs, each list's codes), as ``pa.chunked_array(lists).dictionary_encode()`` gives them, for
    ``lists`` of string IDs without nulls all of one width; None otherwise (or where two IDs share a key)."""
    if not lists or any(len(a) == 0 or a.null_count or not pa.types.is_string(a.type) for a in lists):
        return None
    blocks = [_bytes(a) for a in lists]
    widths = {b.shape[1] if b is not None else -1 for b in blocks}
    if len(widths) != 1 or -1 in widths or 0 in widths:
        return None
    width = widths.pop()
    keys = [pa.array(_keys(b)) for b in blocks]
    encoded = pa.chunked_array(keys).dictionary_encode().chunks
    codes = [e.indices.to_numpy(zero_copy_only=False) for e in encoded]
    count = len(encoded[0].dictionary)
    if count * width >= 2**31:  # a string array's 32-bit offsets
        return None
    word = f"<u{next(w for w in (8, 4, 2, 1) if width % w == 0)}"  # rows as words: NumPy takes them faster than bytes
    rows = [b.view(word) for b in blocks]
    distinct, seen = np.empty((count, rows[0].shape[1]), dtype=word), 0
    for r, c in zip(rows, codes, strict=True):  # each key's bytes from a row of the list that first holds it
        new = c >= seen  # codes count up in first-seen order: a list's new ones are above every earlier list's
        distinct[c[new]] = r[new]
        seen = max(seen, int(c.max()) + 1)
    if width > 8:  # a key is a hash: every row's bytes must be its key's (up to 8, a key is the bytes themselves)
        for r, c in zip(rows, codes, strict=True):
            for start in range(0, len(c), BLOCK):
                if not np.array_equal(_take(distinct, c[start : start + BLOCK]), r[start : start + BLOCK]):
                    return None
    return _strings(distinct, count, width), codes


def sorted_strings(strings: pa.Array) -> tuple[np.ndarray, pa.Array] | None:
    """(the order ``pc.sort_indices(strings)`` gives, the strings in that order) for strings without nulls all of
    one width; None otherwise. Equal strings keep their order (a stable sort, as Arrow's)."""
    rows = _bytes(strings) if len(strings) and not strings.null_count and pa.types.is_string(strings.type) else None
    if rows is None:
        return None
    n, width = rows.shape
    place = max(1, (n - 1).bit_length())  # the low bits that hold a row's place
    packed, stop = _number(rows, 0, 2 ** (64 - place))
    np.left_shift(packed, np.uint64(place), out=packed)
    np.bitwise_or(packed, np.arange(n, dtype=np.uint64), out=packed)
    packed.sort()  # distinct words: no sort is needed to be stable
    first = packed >> np.uint64(place)
    order = (packed & np.uint64((1 << place) - 1)).astype(np.int64)
    start = np.ones(n, dtype=bool)  # where a run of strings equal in the first positions begins
    np.not_equal(first[1:], first[:-1], out=start[1:])
    if stop < width and not start.all():  # ties: ordered by the later positions, within their runs only
        tied = ~start
        tied[:-1] |= tied[1:]
        at = np.flatnonzero(tied)
        rest, later = rows[order[at]], [np.cumsum(start)[at]]
        while stop < width:
            word, stop = _number(rest, stop, 2**64)
            later.append(word)
        order[at] = order[at][np.lexsort(later[::-1])]
    return order, _strings(_take(rows, order), n, width)


def _number(rows: np.ndarray, start: int, room: int) -> tuple[np.ndarray, int]:
    """The bytes of each row from position ``start`` on, as one number below ``room`` whose order is theirs: each
    position's byte ranked among the bytes it holds in ``rows`` (positions holding one byte left out), the ranks in
    mixed radix, as many positions as fit; with the position after the last one taken."""
    word = np.zeros(len(rows), dtype=np.uint64)
    for j in range(start, rows.shape[1]):
        held = np.bincount(rows[:, j], minlength=256) > 0
        radix = int(held.sum())
        if radix > room:
            return word, j
        if radix > 1:
            room //= radix
            np.multiply(word, np.uint64(radix), out=word)
            np.add(word, np.take((np.cumsum(held) - 1).astype(np.uint64), rows[:, j]), out=word)
    return word, rows.shape[1]


def _strings(data: np.ndarray, count: int, width: int) -> pa.Array:
    """``count`` strings of ``width`` bytes each, one after another in ``data``, as an Arrow string array."""
    offsets = pa.py_buffer(np.arange(0, (count + 1) * width, width, dtype=np.int32))
    return pa.StringArray.from_buffers(count, offsets, pa.py_buffer(data))


def _take(rows: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """``rows[indices]`` of a C-contiguous 2-D array, each row moved whole by Arrow's take on fixed-size binary
    values (several times faster than NumPy's indexing of rows of a few bytes)."""
    size = rows.shape[1] * rows.itemsize
    whole = pa.FixedSizeBinaryArray.from_buffers(pa.binary(size), len(rows), [None, pa.py_buffer(rows)])
    taken = whole.take(pa.array(indices)).buffers()[1]
    return np.frombuffer(taken, dtype=rows.dtype, count=len(indices) * rows.shape[1]).reshape(len(indices), -1)


def _bytes(ids: pa.Array) -> np.ndarray | None:
    """The IDs' bytes as rows of one width (a view of the array's data), or None where their widths differ."""
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int32)[ids.offset : ids.offset + len(ids) + 1]
    size = int(offsets[-1] - offsets[0])
    if size == 0 or size % len(ids):
        return None
    width = size // len(ids)
    if not np.array_equal(offsets, offsets[0] + width * np.arange(len(ids) + 1, dtype=np.int64)):
        return None
    data = np.frombuffer(ids.buffers()[2], dtype=np.uint8)
    return data[offsets[0] : offsets[-1]].reshape(len(ids), width)


def _keys(rows: np.ndarray) -> np.ndarray:
    """One uint64 key a row of bytes: the bytes themselves (little-endian, zero-padded) up to 8 a row, else each
    8 bytes of the row (the last 8 overlapping the word before where the width is no multiple of 8) folded in turn
    (xor, multiply by ``MIX``, xor with its top bits shifted down). ``rows`` is C-contiguous (:func:`_bytes`)."""
    n, width = rows.shape
    if width <= 8:
        padded = np.zeros((n, 8), dtype=np.uint8)
        padded[:, :width] = rows
        return padded.view(np.uint64).ravel()
    key, shifted = np.full(n, START, dtype=np.uint64), np.empty(n, dtype=np.uint64)
    for at in [*range(0, width - 7, 8), *([width - 8] if width % 8 else [])]:  # the last word overlaps the one before
        word = np.ndarray((n,), dtype="<u8", buffer=rows, offset=at, strides=(width,))  # 8 bytes of each row
        np.bitwise_xor(key, word, out=key)
        np.multiply(key, MIX, out=key)
        np.right_shift(key, np.uint64(29), out=shifted)
        np.bitwise_xor(key, shifted, out=key)
    return key
