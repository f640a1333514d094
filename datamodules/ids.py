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
                if not np.array_equal(np.take(distinct, c[start : start + BLOCK], axis=0), r[start : start + BLOCK]):
                    return None
    offsets = pa.py_buffer(np.arange(0, (count + 1) * width, width, dtype=np.int32))
    dictionary = pa.StringArray.from_buffers(count, offsets, pa.py_buffer(distinct))
    return dictionary, codes


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
    """One uint64 key a row of bytes: the bytes themselves (little-endian, zero-padded) up to 8 a row, else every
    word of the row folded in turn (xor, multiply by ``MIX``, xor with its top bits shifted down)."""
    n, width = rows.shape
    if width <= 8:
        padded = np.zeros((n, 8), dtype=np.uint8)
        padded[:, :width] = rows
        return padded.view(np.uint64).ravel()
    word = next(w for w in (8, 4, 2, 1) if width % w == 0)
    words = rows.view(f"<u{word}")
    key = np.full(n, START, dtype=np.uint64)
    for j in range(words.shape[1]):
        np.bitwise_xor(key, words[:, j], out=key, casting="unsafe")
        np.multiply(key, MIX, out=key)
        np.bitwise_xor(key, key >> np.uint64(29), out=key)
    return key
