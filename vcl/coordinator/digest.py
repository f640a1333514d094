"""The digest a checkpoint keeps of the data a run was made with (:func:`vcl.coordinator.runner.data_differ` compares
it when the run resumes): one SHA-256 over every array's bytes, row IDs, names and settings, in a fixed order."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import torch

from vcl.datamodules.prepare import Preparation

DIGEST = "sha256"  # SHA-NI makes it ~3x BLAKE2b's speed on x86 (256 MB: 0.17 s against 0.46 s); before: blake2b
DIGEST_VERSION = 3
PIECE = 1 << 26  # version 3: an array's bytes are digested 64 MiB at a time, on every core, the pieces' digests in turn


def data_digest(data, algorithm: str = DIGEST, version: int = DIGEST_VERSION) -> str:
    """A digest of the data the coordinating process holds (every party's under the local transport; Alice's labels,
    the row IDs and the parties' names under ray), which a resumed run must find unchanged (``runner.data_differ``).
    ``version`` 3 (now): an array's bytes as the digests of its pieces of :data:`PIECE` bytes, row IDs as lengths
    and UTF-8 bytes; 2: the bytes in one stream, row IDs as ``repr``; 1: with the preparations (:func:`_as_before`)."""

    def new():
        return hashlib.blake2b(digest_size=16) if algorithm == "blake2b" else hashlib.sha256()

    digest = new()
    pool = ThreadPoolExecutor(os.cpu_count() or 1) if version >= 3 else None

    def piece(view: memoryview) -> bytes:
        part = new()
        part.update(view)
        return part.digest()

    def feed_bytes(array: np.ndarray) -> None:  # a contiguous array of numbers: its bytes
        if pool is None:
            digest.update(array.data)
            return
        raw = memoryview(array.reshape(-1).view(np.uint8))
        for done in pool.map(piece, [raw[start : start + PIECE] for start in range(0, len(raw), PIECE)]):
            digest.update(done)

    def feed(value) -> None:
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().contiguous().numpy()
        if version >= 3 and isinstance(value, list | tuple) and value and all(type(v) is str for v in value):
            value = pa.array(value, pa.large_string())  # row IDs: digested as Arrow holds them, below
        if isinstance(value, np.ndarray):
            digest.update(f"{value.dtype}{value.shape}".encode())
            if value.dtype == object:
                digest.update(repr(value).encode())
            else:
                feed_bytes(np.ascontiguousarray(value))
        elif version >= 3 and isinstance(value, pa.Array) and value.type in (pa.string(), pa.large_string()):
            value = value.cast(pa.large_string())  # row IDs: how many, each one's length, then their bytes
            digest.update(f"[{len(value)}/{value.null_count}".encode() if len(value) else b"[0")
            if len(value):
                ends = np.frombuffer(value.buffers()[1], np.int64)[value.offset : value.offset + len(value) + 1]
                feed_bytes(np.diff(ends))
                feed_bytes(np.frombuffer(value.buffers()[2] or b"", np.uint8)[ends[0] : ends[-1]])
        elif version < 2 and isinstance(value, Preparation):
            for name, part in _as_before(value):
                digest.update(name.encode())
                feed(part)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                mark = f.metadata.get("digest")
                if mark is False or (mark == "before 2" and version >= 2):  # a hint (VerticalData.places), or derived
                    continue
                digest.update(f.name.encode())
                feed(getattr(value, f.name))
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                digest.update(str(key).encode())
                feed(value[key])
        elif isinstance(value, pa.Array) and (pa.types.is_string(value.type) or pa.types.is_large_string(value.type)):
            digest.update(f"[{len(value)}".encode())  # row IDs held by Arrow: as their list was, a slice at a time
            for start in range(0, len(value), 1 << 16):
                digest.update("".join(map(repr, value.slice(start, 1 << 16).to_pylist())).encode())
        elif isinstance(value, list | tuple):
            digest.update(f"[{len(value)}".encode())
            if value and all(type(item) is str for item in value):  # row IDs: the same bytes, in one update
                digest.update("".join(map(repr, value)).encode())
                return
            for item in value:
                feed(item)
        else:
            digest.update(repr(value).encode())

    try:
        feed(data)
    finally:
        if pool is not None:
            pool.shutdown()
    return digest.hexdigest()[:32]


def _as_before(prep: Preparation) -> list[tuple[str, object]]:
    """A preparation's fields as a digest of version 1 took them in: its scikit-learn imputers and encoders by their
    ``repr`` (their settings, not what they learned), then its training means and deviations."""
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import OneHotEncoder

    imputer = None if prep.means is None else SimpleImputer(strategy="mean")
    fills = {j: SimpleImputer(strategy="most_frequent", missing_values=np.nan) for j in prep.fills}
    encoders = {j: OneHotEncoder(handle_unknown="ignore", sparse_output=False) for j in prep.categories}
    return [("raw", prep.raw), ("kinds", prep.kinds), ("missing", prep.missing), ("imputer", imputer),
            ("fills", fills), ("encoders", encoders), ("mean", prep.mean), ("std", prep.std)]  # fmt: skip
