"""Anchor data X^anc (r × m) for DC analysis: the constructions of the SMOTE-anchor paper, Section 3
(docs/dc.md). Each says what one worker shares (:meth:`AnchorConstruction.share`) and how every worker builds the
same X^anc from all shares, X_pub and the agreed seed (:meth:`AnchorConstruction.anchor`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcl.errors import VCLInputError

ANCHORS = ("smote", "tsvd", "rand", "raw")


def uniform_in_ranges(low: np.ndarray, high: np.ndarray, r: int, rng: np.random.Generator) -> np.ndarray:
    """DC(rand): x_ij ~ U(x_j^min, x_j^max), r rows."""
    return rng.uniform(low, high, size=(r, len(low)))


def truncated_svd_approximation(X: np.ndarray, rank: int, delta: float, rng: np.random.Generator) -> np.ndarray:
    """DC(TSVD), one worker: X^TSVD (rank ``rank``) + δ E with E ~ N(0, 1) entries (Section 3.1)."""
    if not 1 <= rank <= min(X.shape):
        raise VCLInputError(
            f"dc.tsvd_rank={rank}, but a party holds a {X.shape[0]}×{X.shape[1]} block; use 1..{min(X.shape)}."
        )
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    return (U[:, :rank] * s[:rank]) @ Vt[:rank] + delta * rng.standard_normal(X.shape)


def select_or_augment(X: np.ndarray, r: int, rng: np.random.Generator) -> np.ndarray:
    """r rows from X: a random subset if r ≤ n, else X plus r − n random linear combinations
    x_a + c (x_b − x_a), c ~ U(0, 1), of random pairs (the paper's augmentation for r > n)."""
    n = X.shape[0]
    if r <= n:
        return X[rng.permutation(n)[:r]]
    a, b = rng.integers(0, n, size=(2, r - n))
    c = rng.uniform(0.0, 1.0, size=(r - n, 1))
    return np.vstack([X, X[a] + c * (X[b] - X[a])])


def smote(X_pub: np.ndarray, r: int, k: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Algorithm 2: SMOTE extended to coefficients c ∈ [0, α] and a large k, on the z-scored public rows: each row
    emits x_i + c (x̌ − x_i) for r/p of its k nearest neighbours (without replacement when r/p ≤ k; the first r mod p
    rows of a random order one more). With independent rows and α = 1.5 the new rows keep the variance:
    V[x'] = (2α²/3 − α + 1) V[x]."""
    p = X_pub.shape[0]
    if not 1 <= k <= p - 1:
        raise VCLInputError(f"dc.smote_k={k} with {p} public rows; use 1 ≤ k ≤ {p - 1} (or more dc.public_rows).")
    if alpha <= 0:
        raise VCLInputError(f"dc.smote_alpha={alpha}; use a positive α (1.5 keeps the variance).")
    mean, std = X_pub.mean(0), X_pub.std(0)
    std = np.where(std > 0, std, 1.0)
    Z = (X_pub - mean) / std
    d2 = ((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    neighbours = np.argsort(d2, axis=1, kind="stable")[:, :k]
    counts = np.full(p, r // p)
    counts[rng.permutation(p)[: r % p]] += 1
    rows = []
    for i in range(p):
        if counts[i] == 0:
            continue
        picks = rng.choice(neighbours[i], size=counts[i], replace=counts[i] > k)
        c = rng.uniform(0.0, alpha, size=(counts[i], 1))
        rows.append(Z[i] + c * (Z[picks] - Z[i]))
    return np.vstack(rows) * std + mean


@dataclass(frozen=True)
class GridLayout:
    """The public facts of a c × d split: row groups, and each column group's global column indices."""

    row_groups: int
    column_groups: list[list[int]]

    @property
    def num_features(self) -> int:
        return sum(len(g) for g in self.column_groups)


class AnchorConstruction:
    """Base: nothing shared, nothing built."""

    name = "anchor"

    def share(self, private: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """What a worker with private block ``private`` sends every other worker."""
        return {}

    def anchor(
        self,
        layout: GridLayout,
        shares: dict[tuple[int, int], dict[str, np.ndarray]],
        public: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        raise NotImplementedError


def _blocks(layout: GridLayout, shares, key: str) -> np.ndarray:
    """The (Σ n_i) × m matrix assembled from every worker's shared block ``key``."""
    rows = []
    for i in range(layout.row_groups):
        n_i = shares[(i, 0)][key].shape[0]
        x = np.empty((n_i, layout.num_features))
        for j, cols in enumerate(layout.column_groups):
            x[:, cols] = shares[(i, j)][key]
        rows.append(x)
    return np.vstack(rows)


@dataclass
class RandomAnchors(AnchorConstruction):
    anchors: int
    spread: float = 1.0  # the range's width about its middle: 1 is each feature's [min, max], as the paper
    name = "rand"

    def share(self, private, rng):
        return {"low": private.min(0), "high": private.max(0)}

    def anchor(self, layout, shares, public, rng):
        low, high = np.empty(layout.num_features), np.empty(layout.num_features)
        for j, cols in enumerate(layout.column_groups):
            low[cols] = np.min([shares[(i, j)]["low"] for i in range(layout.row_groups)], axis=0)
            high[cols] = np.max([shares[(i, j)]["high"] for i in range(layout.row_groups)], axis=0)
        if self.spread != 1.0:
            middle, half = (low + high) / 2, (high - low) / 2 * self.spread
            low, high = middle - half, middle + half
        return uniform_in_ranges(low, high, self.anchors, rng)


@dataclass
class TSVDAnchors(AnchorConstruction):
    anchors: int
    rank: int
    delta: float
    name = "tsvd"

    def share(self, private, rng):
        return {"approx": truncated_svd_approximation(private, self.rank, self.delta, rng)}

    def anchor(self, layout, shares, public, rng):
        return select_or_augment(_blocks(layout, shares, "approx"), self.anchors, rng)


@dataclass
class SMOTEAnchors(AnchorConstruction):
    anchors: int
    k: int
    alpha: float
    name = "smote"

    def anchor(self, layout, shares, public, rng):
        return smote(public, self.anchors, self.k, self.alpha, rng)


class RawAnchors(AnchorConstruction):
    name = "raw"

    def share(self, private, rng):
        return {"rows": private}

    def anchor(self, layout, shares, public, rng):
        return _blocks(layout, shares, "rows")


def make_anchor_construction(
    name: str,
    anchors: int,
    smote_k: int = 25,
    smote_alpha: float = 1.5,
    tsvd_rank: int = 3,
    tsvd_delta: float = 0.1,
    rand_spread: float = 1.0,
) -> AnchorConstruction:
    if anchors < 1:
        raise VCLInputError(f"dc.anchor_rows={anchors}; use at least 1 anchor row.")
    if name == "rand":
        return RandomAnchors(anchors, rand_spread)
    if name == "tsvd":
        if tsvd_delta < 0:
            raise VCLInputError(f"dc.tsvd_delta={tsvd_delta}; use a perturbation δ ≥ 0.")
        return TSVDAnchors(anchors, tsvd_rank, tsvd_delta)
    if name == "smote":
        return SMOTEAnchors(anchors, smote_k, smote_alpha)
    if name == "raw":
        return RawAnchors()
    raise VCLInputError(f"anchor construction {name!r} is unknown; use one of {', '.join(ANCHORS)}.")
