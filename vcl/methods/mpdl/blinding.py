"""Private set intersection by commutative blinding (Diffie–Hellman PSI; MPDL Section III-B2), over X25519 as
:mod:`vcl.alignment.psi`: A → B ``a·H(x)`` (:class:`BlindedIDs`); B → A those blinded by ``b`` and its own
``b·H(y)`` shuffled; A matches and tells B the positions (:class:`IntersectionIndices`), so both hold D_C in one
order; B assigns the folds (:class:`FoldAssignment`). No raw or merely hashed ID crosses."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vcl.alignment import psi
from vcl.errors import VCLInputError
from vcl.messages import ValuesMessage


# --- the messages of this protocol step (each declares its tensors once; see vcl.messages) ---
@dataclass(frozen=True)
class BlindedIDs(ValuesMessage):
    """MPDL PSI (:mod:`vcl.methods.mpdl.blinding`): row IDs hashed onto Curve25519 and blinded by secret scalars, one
    point per row (N × 32, uint8). No raw or merely hashed ID."""

    tensors = {"blinded": "values"}


@dataclass(frozen=True)
class IntersectionIndices(ValuesMessage):
    """MPDL PSI, A → B: positions in B's shuffled blinded list of the rows both hold, in A's row order."""

    tensors = {"positions": "values"}


@dataclass(frozen=True)
class FoldAssignment(ValuesMessage):
    """MPDL, B → A: the fold (0..K−1) of each aligned co-occurring row (Algorithm 1's K shares of D_C)."""

    tensors = {"fold": "values"}


def encode(values: list[bytes]) -> torch.Tensor:
    """Curve points as rows of 32 bytes (uint8, N × 32): how they travel in a message."""
    return torch.from_numpy(psi.encode(values).copy())


def decode(t: torch.Tensor) -> list[bytes]:
    return psi.decode(t.numpy())


class PSIParty:
    """One side of the PSI: its IDs, a secret scalar that never leaves it (:class:`vcl.alignment.psi.PSISide`, fresh
    from the operating system) and, at B, the order of its shuffled list (from B's own secret)."""

    def __init__(self, name: str, ids: list[str], shuffle_seed: int = 0):
        self.name, self.ids = name, list(ids)
        self._side = psi.PSISide(name, self.ids)  # refuses IDs that are not unique
        self._order = np.random.default_rng(shuffle_seed).permutation(len(ids))  # B's shuffled list

    def blind_own(self, shuffled: bool = False) -> list[bytes]:
        order = self._order if shuffled else range(len(self.ids))
        return self.blind(psi.hash_to_curve([self.ids[i] for i in order]))

    def blind(self, values: list[bytes]) -> list[bytes]:
        """Each point multiplied by this side's secret scalar."""
        return self._side.blind(values)

    # --- the protocol's four messages, each at the side that sends it ------------------------------------
    def offer(self, receiver: str, round_: int) -> BlindedIDs:
        """1 (A): its IDs hashed and blinded, in its own order."""
        return BlindedIDs(self.name, receiver, round_, encode(self.blind_own()))

    def answer(self, offer: BlindedIDs, round_: int) -> tuple[BlindedIDs, BlindedIDs]:
        """2 (B): A's values blinded again (same order), and its own IDs blinded, in a shuffled order."""
        twice = encode(self.blind(decode(offer.values)))
        own = encode(self.blind_own(shuffled=True))
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
