"""XGBoost's classifier as DC's central or interpretable model (``dc.central: xgboost``, ``dc.interpretable:
xgboost``; the model DC's Tables 2–5 fit, with its default parameters).

XGBoost asks for the classes 0..K−1 and a DC worker's anchor labels may lack some, so :class:`XGBoost` encodes the
labels present first (``classes_`` are the labels themselves, as scikit-learn's classifiers give them) and predicts
a single class as itself. It is stored with skops like every estimator (:func:`vcl.models.sklearn.load_estimator`
trusts exactly this class and XGBoost's two, whose state is the booster's own model format, data).
"""

from __future__ import annotations

import importlib.util

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from vcl.errors import VCLInputError

TYPES = ("vcl.models.boosting.XGBoost", "xgboost.sklearn.XGBClassifier", "xgboost.core.Booster")


class XGBoost(ClassifierMixin, BaseEstimator):
    """``xgboost.XGBClassifier`` with its default parameters, on any labels; one thread, so runs repeat exactly."""

    def __init__(self, random_state: int = 0):
        self.random_state = random_state

    def fit(self, X, y):
        from xgboost import XGBClassifier

        self.classes_, codes = np.unique(np.asarray(y), return_inverse=True)
        X = np.asarray(X)
        self.n_features_in_ = X.shape[1]
        self.model_ = None
        self.feature_importances_ = np.zeros(X.shape[1])
        if len(self.classes_) > 1:
            self.model_ = XGBClassifier(random_state=self.random_state, n_jobs=1).fit(X, codes)
            self.feature_importances_ = np.asarray(self.model_.feature_importances_, dtype=np.float64)
        return self

    def predict_proba(self, X) -> np.ndarray:
        if self.model_ is None:  # one class in the labels
            return np.ones((np.asarray(X).shape[0], 1))
        return self.model_.predict_proba(np.asarray(X))

    def predict(self, X) -> np.ndarray:
        return self.classes_[self.predict_proba(X).argmax(1)]


def xgboost(option: str, seed: int) -> XGBoost:
    """A fresh :class:`XGBoost` for ``option`` (``dc.central`` or ``dc.interpretable``); refused before the run
    starts where XGBoost is not installed."""

    if importlib.util.find_spec("xgboost") is None:
        raise VCLInputError(
            f"{option}=xgboost needs XGBoost, which is not installed; install it with `pip install 'vcl[xgboost]'` "
            "(or `pip install xgboost`), or use gb."
        )
    return XGBoost(random_state=seed)
