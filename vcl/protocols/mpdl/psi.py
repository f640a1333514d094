"""Private set intersection by commutative blinding (Diffie–Hellman PSI; MPDL Section III-B2).

Every ID is hashed into the quadratic residues of a safe prime p (``H(x) = sha256(x)² mod p``) and
blinded by exponentiation with a party's secret exponent. Exponentiation commutes, so
``(H(x)^a)^b = (H(x)^b)^a``, while a blinded value reveals nothing about ``x`` without the exponent
(decisional Diffie–Hellman). Protocol (A holds ``ids_a``, B holds ``ids_b``):

1. A → B: ``H(x)^a`` for its IDs, in A's order (:class:`BlindedIDs`);
2. B → A: those values raised to ``b`` (same order), and ``H(y)^b`` for its own IDs in a random order;
3. A raises B's values to ``a`` and matches the doubly blinded values: it learns which of its rows are in
   the intersection and where each sits in B's shuffled list, and tells B those positions in A's row
   order (:class:`IntersectionIndices`), so both hold D_C in one agreed order;
4. B assigns the aligned rows to K folds and tells A (:class:`FoldAssignment`).

No raw or merely hashed ID crosses; each side learns only the intersection (and the other's set size).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

import numpy as np
import torch
from gmpy2 import powmod

from vcl.errors import VCLInputError
from vcl.messages import Channel, ValuesMessage


# --- the messages of this protocol step (each declares its tensors once; see vcl.messages) ---
@dataclass(frozen=True)
class BlindedIDs(ValuesMessage):
    """MPDL PSI (:mod:`vcl.protocols.mpdl.psi`): row IDs hashed into a group and blinded by secret exponents, one
    group element per row as big-endian bytes (N × bytes(p), uint8). No raw or merely hashed ID."""

    tensors = {"blinded": "values"}


@dataclass(frozen=True)
class IntersectionIndices(ValuesMessage):
    """MPDL PSI, A → B: positions in B's shuffled blinded list of the rows both hold, in A's row order."""

    tensors = {"positions": "values"}


@dataclass(frozen=True)
class FoldAssignment(ValuesMessage):
    """MPDL, B → A: the fold (0..K−1) of each aligned co-occurring row (Algorithm 1's K shares of D_C)."""

    tensors = {"fold": "values"}


# RFC 2409 group 2 (1024-bit) and RFC 3526 group 14 (2048-bit) MODP primes: safe primes p = 2q + 1.
MODP_PRIMES = {
    1024: int(
        "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
        "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
        "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF",
        16,
    ),
    2048: int(
        "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
        "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
        "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
        "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
        "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
        "15728E5A8AACAA68FFFFFFFFFFFFFFFF",
        16,
    ),
}
EXPONENT_BITS = 256  # short secret exponents: the DH security level of these groups, far cheaper to use


def check_psi_bits(bits: int) -> int:
    if bits not in MODP_PRIMES:
        raise VCLInputError(f"mpdl.psi_bits={bits}; use one of {', '.join(map(str, MODP_PRIMES))} (the MODP group).")
    return bits


def hash_to_group(identifier: str, p: int) -> int:
    """``sha256(id)² mod p``: an element of the order-q subgroup of quadratic residues."""
    h = int.from_bytes(hashlib.sha256(identifier.encode()).digest(), "big") % p
    return pow(h, 2, p)


def encode(values: list[int], p: int) -> torch.Tensor:
    """Group elements as rows of big-endian bytes (uint8, N × bytes(p)): how they travel in a message."""
    width = (p.bit_length() + 7) // 8
    raw = b"".join(v.to_bytes(width, "big") for v in values)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).reshape(len(values), width).clone()


def decode(t: torch.Tensor) -> list[int]:
    return [int.from_bytes(bytes(row.tolist()), "big") for row in t]


class PSIParty:
    """One side of the PSI: its IDs and a secret exponent that never leaves it."""

    def __init__(self, name: str, ids: list[str], bits: int = 2048, shuffle_seed: int = 0):
        if len(set(ids)) != len(ids):
            raise VCLInputError(f"party {name}: its row IDs are not unique; give every row its own ID.")
        self.name, self.ids = name, list(ids)
        self.p = MODP_PRIMES[check_psi_bits(bits)]
        self._secret = 1 + secrets.randbelow(2**EXPONENT_BITS)
        self._order = np.random.default_rng(shuffle_seed).permutation(len(ids))  # B's shuffled list

    def blind_own(self, shuffled: bool = False) -> list[int]:
        order = self._order if shuffled else range(len(self.ids))
        return self.blind([hash_to_group(self.ids[i], self.p) for i in order])

    def blind(self, values: list[int]) -> list[int]:
        """``v^secret mod p`` (GMP's modular exponentiation, ~8× Python's ``pow`` at 1024 bits)."""
        return [int(powmod(v, self._secret, self.p)) for v in values]

    # --- the protocol's four messages, each at the side that sends it ------------------------------------
    def offer(self, receiver: str, round_: int) -> BlindedIDs:
        """1 (A): its IDs hashed and blinded, in its own order."""
        return BlindedIDs(self.name, receiver, round_, encode(self.blind_own(), self.p))

    def answer(self, offer: BlindedIDs, round_: int) -> tuple[BlindedIDs, BlindedIDs]:
        """2 (B): A's values blinded again (same order), and its own IDs blinded, in a shuffled order."""
        twice = encode(self.blind(decode(offer.values)), self.p)
        own = encode(self.blind_own(shuffled=True), self.p)
        return BlindedIDs(self.name, offer.sender, round_, twice), BlindedIDs(self.name, offer.sender, round_, own)

    def match(self, twice: BlindedIDs, theirs: BlindedIDs, round_: int) -> tuple[np.ndarray, IntersectionIndices]:
        """3 (A): its rows in the intersection, and where each sits in B's shuffled list (to B)."""
        position_in_b = {v: j for j, v in enumerate(self.blind(decode(theirs.values)))}
        rows, positions = [], []
        for i, v in enumerate(decode(twice.values)):
            if v in position_in_b:
                rows.append(i)
                positions.append(position_in_b[v])
        message = IntersectionIndices(self.name, theirs.sender, round_, torch.tensor(positions, dtype=torch.int64))
        return np.asarray(rows, dtype=np.int64), message

    def assign_folds(
        self, indices: IntersectionIndices, folds: int, fold_seed: int, round_: int
    ) -> tuple[np.ndarray, np.ndarray, FoldAssignment]:
        """4 (B): its rows of the intersection in A's order, and their K folds (to A)."""
        rows = self._order[indices.values.numpy()].astype(np.int64)
        n = len(rows)
        if n < 2 * folds:
            raise VCLInputError(
                f"the parties share {n} rows, too few for mpdl.folds={folds} (2 rows per fold); "
                f"lower mpdl.folds to at most {n // 2}, or share more rows (mpdl.gamma, mpdl.max_rows)."
            )
        fold = np.random.default_rng(fold_seed).permutation(n) % folds
        return rows, fold, FoldAssignment(self.name, indices.sender, round_, torch.from_numpy(fold.astype(np.int64)))


def private_set_intersection(
    a: PSIParty, b: PSIParty, channel: Channel, round_: int, folds: int, fold_seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The protocol above in one process (each message through ``channel``); returns (A's row indices of D_C,
    B's row indices of D_C, fold of each row). Row i of D_C is A's row ``a_rows[i]`` and B's row
    ``b_rows[i]`` (the same ID); ``fold[i]`` is in 0..K−1. (In a run, the parties take these steps apart.)"""
    offer = channel.send(a.offer(b.name, round_))
    twice, theirs = (channel.send(m) for m in b.answer(offer, round_))
    a_rows, indices = a.match(twice, theirs, round_)
    b_rows, _, assignment = b.assign_folds(channel.send(indices), folds, fold_seed, round_)
    return a_rows, b_rows, channel.send(assignment).values.numpy()
