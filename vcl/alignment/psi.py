"""Private set intersection of row IDs by elliptic-curve Diffie–Hellman over X25519 (libsodium, through PyNaCl).

Each side hashes its IDs onto the curve, blinds them with its secret scalar in a secret order, and blinds the other's
again; an ID both hold ends at the same value. Scalar and shuffle never leave the side; blinding runs over threads
(libsodium lets go of the GIL). Steps: docs/deployment.md ("Row alignment by private set intersection")."""

from __future__ import annotations

import hashlib
import os
import secrets
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat
from pathlib import Path

import numpy as np

from vcl.datamodules.csv_files import csv_ids
from vcl.datamodules.reading import note_offer
from vcl.errors import VCLInputError

POINT = 32  # bytes of one X25519 u-coordinate
TAG = b"vcl-psi-x25519\x00"  # domain separation of the hash onto the curve
PROTOCOL = "ecdh-x25519"


def hash_to_curve(ids: list[str]) -> list[bytes]:
    """Each ID as an X25519 u-coordinate: SHA-256 of the tag and the ID's UTF-8 bytes (X25519 ignores bit 255)."""
    return [hashlib.sha256(TAG + str(x).encode()).digest() for x in ids]


def _blind_chunk(secret: bytes, values: list[bytes]) -> list[bytes]:
    from nacl.bindings import crypto_scalarmult

    return [crypto_scalarmult(secret, v) for v in values]


class PSISide:
    """One side of the intersection: its IDs, its secret scalar and its secret shuffle (never sent)."""

    def __init__(self, name: str, ids: list[str], secret: bytes | None = None, workers: int | None = None):
        if len(set(ids)) != len(ids):
            raise VCLInputError(f"party {name}: its row IDs are not unique; give every row its own ID.")
        self.name, self.ids = name, list(ids)
        self._secret = secret if secret is not None else secrets.token_bytes(POINT)
        rng = np.random.default_rng(int.from_bytes(secrets.token_bytes(8), "big"))
        self._order = rng.permutation(len(ids))  # position k of what it sends is its row _order[k]
        self.workers = workers or min(4, os.cpu_count() or 1)
        self._theirs_twice: dict[bytes, int] = {}  # the other's values blinded by both -> their place in its offer

    def blind(self, values: list[bytes]) -> list[bytes]:
        """``values`` multiplied by this side's secret, in the same order (in chunks over threads)."""
        if len(values) < 2048 or self.workers == 1:
            return _blind_chunk(self._secret, values)
        size = -(-len(values) // self.workers)
        chunks = [values[i : i + size] for i in range(0, len(values), size)]
        with ThreadPoolExecutor(self.workers) as pool:
            return [v for part in pool.map(lambda c: _blind_chunk(self._secret, c), chunks) for v in part]

    def offer(self) -> np.ndarray:
        """Message 1: its IDs hashed and blinded once, in its secret order (N × 32 bytes, uint8)."""
        hashed = hash_to_curve([self.ids[i] for i in self._order])
        return encode(self.blind(hashed))

    def answer(self, theirs: np.ndarray) -> np.ndarray:
        """Message 2: the other side's values blinded again, in the order they came (kept here for the match)."""
        twice = self.blind(decode(theirs))
        self._theirs_twice = dict(zip(twice, range(len(twice)), strict=True))
        return encode(twice)

    def match(self, own_twice: np.ndarray) -> np.ndarray:
        """This side's rows in the intersection, from its own values as the other returned them (``own_twice``, in
        its secret order) against the other's as this side blinded them again, in the order of their IDs: row k of
        either side's answer is the same individual."""
        return np.asarray(sorted(self.shared_rows(own_twice).tolist(), key=lambda row: self.ids[row]), dtype=np.int64)

    def shared_rows(self, own_twice: np.ndarray) -> np.ndarray:
        """:meth:`match`'s rows in this side's own order: a star's centre intersects every party's and sorts them by
        ID once (:func:`vcl.coordinator.assembly.psi_with_parties`), not once a party."""
        return self.shared(own_twice)[0]

    def shared(self, own_twice: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`shared_rows`, and for each of them its place in the other side's offer (the other side's secret
        order, which only it can turn into its rows). Sent back to that side, the places tell it which of its rows
        are shared, as the shared IDs themselves do, and spare it looking each ID up (:func:`offer_rows`)."""
        own = decode(own_twice)
        wide = np.int32 if len(self._theirs_twice) < 2**31 else np.int64  # half the bytes a place: 4 MB at 10^6
        places = np.fromiter(map(self._theirs_twice.get, own, repeat(-1)), dtype=wide, count=len(own))
        found = places >= 0
        rows, places = self._order[found], places[found]
        by_row = np.argsort(rows)
        return rows[by_row], places[by_row]

    def offer_rows(self) -> np.ndarray:
        """For each place in this side's offer, its index among this side's IDs (its secret order, kept by a party
        for its Setup: :func:`vcl.datamodules.reading.note_offer`)."""
        return self._order


def encode(values: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), POINT)


def decode(array: np.ndarray) -> list[bytes]:
    array = np.ascontiguousarray(array, dtype=np.uint8)
    if array.ndim != 2 or array.shape[1] != POINT:
        raise VCLInputError(f"a PSI message holds {array.shape} bytes; each value is {POINT} bytes.")
    raw = array.tobytes()
    return [raw[i : i + POINT] for i in range(0, len(raw), POINT)]


def intersect(a: PSISide, b: PSISide) -> tuple[np.ndarray, np.ndarray]:
    """The protocol between two sides in one process (each message as the bytes that would cross): what each
    learns, A's rows and B's rows of the intersection, aligned (the same individual at each position)."""
    offer_a, offer_b = a.offer(), b.offer()  # 1: A → B, B → A
    back_to_a, back_to_b = b.answer(offer_a), a.answer(offer_b)  # 2: B → A, A → B
    return a.match(back_to_a), b.match(back_to_b)


def answer_from_file(path: str, id_column: str, drop: bool, label_column: str, offer, keep: bool = False) -> dict:
    """A party's half of the star PSI, where its file is: Alice's blinded IDs blinded again, and its own IDs blinded
    once. ``keep``: this process loads the file next, on the aligned rows, so the read is kept for it."""

    side = PSISide(Path(path).stem, csv_ids(path, id_column, drop, label_column, keep))
    if keep:
        note_offer(path, id_column, label_column, side.offer_rows())
    return {"twice": side.answer(offer), "offer": side.offer()}
