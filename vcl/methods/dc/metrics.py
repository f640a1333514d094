"""DC analysis metrics (SMOTE-anchor paper, Section 4.1): recognition (ACC, NMI, Dice_t) and data
confidentiality of anchor data (EMD, AMD(raw), AMD(anc)). Distances are Euclidean."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial import cKDTree
from scipy.spatial.distance import cdist
from scipy.stats import wasserstein_distance_nd
from sklearn.metrics import normalized_mutual_info_score

EMD_LP_LIMIT = 20_000  # n·r above which a non-square EMD (a linear program) is not attempted


def accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def nmi(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """I(pred; true) / sqrt(H(pred) H(true)) (Strehl & Ghosh), via scikit-learn."""
    return float(normalized_mutual_info_score(y_true, y_pred, average_method="geometric"))


def top_features(importances: np.ndarray, t: int) -> np.ndarray:
    """Indices of the t largest importances (ties: lower index first)."""
    return np.argsort(-np.asarray(importances, dtype=np.float64), kind="stable")[:t]


def dice(reference: np.ndarray, predicted: np.ndarray) -> float:
    """Dice_t = |F*_t ∩ F^pred_t| / t for two top-t feature sets of equal size t."""
    if len(reference) != len(predicted):
        raise ValueError(f"Dice_t compares two top-t sets of one size; got {len(reference)} and {len(predicted)}.")
    return len(set(map(int, reference)) & set(map(int, predicted))) / len(reference)


def amd(X: np.ndarray, Y: np.ndarray) -> float:
    """Average minimum distance from the rows of X to the rows of Y: AMD(raw) = amd(X, X^anc),
    AMD(anc) = amd(X^anc, X)."""
    return float(cKDTree(np.asarray(Y)).query(np.asarray(X), k=1)[0].mean())


def emd(X: np.ndarray, Y: np.ndarray) -> float | None:
    """Earth mover's distance with uniform weights: the mean distance of an optimal matching when
    n = r (the paper's definition, an assignment problem); for n ≠ r the exact transport linear program
    (scipy), or None when n·r exceeds ``EMD_LP_LIMIT``."""
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    if X.shape[0] == Y.shape[0]:
        cost = cdist(X, Y)
        rows, cols = linear_sum_assignment(cost)
        return float(cost[rows, cols].mean())
    if X.shape[0] * Y.shape[0] > EMD_LP_LIMIT:
        return None

    return float(wasserstein_distance_nd(X, Y))
