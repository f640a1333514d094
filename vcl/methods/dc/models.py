"""The scikit-learn pieces of DC by config name (reduction, central and interpretable models), and the
collaboration maps the master computes from the anchors' representations."""

from __future__ import annotations

import numpy as np
from sklearn.base import is_classifier

from vcl.errors import VCLInputError
from vcl.methods.dc.options import CENTRAL_MODELS, INTERPRETABLE_MODELS, REDUCTIONS
from vcl.models.sklearn import make_estimator


# --- the scikit-learn pieces, by config name ---------------------------------------------------------
def _estimator(name: str, key: str):
    return make_estimator(name, key)


def make_reduction(name: str, dim: int, seed: int):
    """A fresh worker-side dimensionality reduction f_ij with ``dim`` components."""
    if name == "pca":
        from sklearn.decomposition import PCA

        return PCA(n_components=dim, svd_solver="full")
    if name == "tsvd":
        from sklearn.decomposition import TruncatedSVD

        return TruncatedSVD(n_components=dim, random_state=seed)
    if name == "identity":
        from sklearn.preprocessing import FunctionTransformer

        return FunctionTransformer()
    if name.startswith("sklearn:"):
        est = _estimator(name, "dc.reduction")
        params = est.get_params()
        if "n_components" in params:
            est.set_params(n_components=dim)
        if "random_state" in params:
            est.set_params(random_state=seed)
        if not hasattr(est, "transform"):
            raise VCLInputError(f"dc.reduction={name!r} has no transform(); use a scikit-learn transformer.")
        return est
    raise VCLInputError(
        f"dc.reduction={name!r} is unknown; use one of {', '.join(REDUCTIONS)} or sklearn:sklearn.<module>.<Class>."
    )


def make_central(name: str, seed: int):
    """The master's analysis h: a regressor fits the one-hot Y (the paper's ridge), a classifier the labels."""
    if name == "ridge":
        from sklearn.linear_model import Ridge

        return Ridge()
    if name == "gb":
        from sklearn.ensemble import GradientBoostingClassifier

        return GradientBoostingClassifier(random_state=seed)
    if name == "xgboost":
        from vcl.models.boosting import xgboost

        return xgboost("dc.central", seed)
    if name.startswith("sklearn:"):
        est = _estimator(name, "dc.central")
        if "random_state" in est.get_params():
            est.set_params(random_state=seed)
        return est
    raise VCLInputError(
        f"dc.central={name!r} is unknown; use one of {', '.join(CENTRAL_MODELS)} or sklearn:sklearn.<module>.<Class>."
    )


def make_interpretable(name: str, splits: int, seed: int):
    """The worker-side interpretable classifier t_i: a tree with at most ``splits`` splits, or boosting (scikit-learn's
    or XGBoost's)."""
    if name == "tree":
        from sklearn.tree import DecisionTreeClassifier

        if splits < 1:
            raise VCLInputError(f"dc.tree_splits={splits}; allow the tree at least 1 split.")
        return DecisionTreeClassifier(max_leaf_nodes=splits + 1, random_state=seed)
    if name == "gb":
        from sklearn.ensemble import GradientBoostingClassifier

        return GradientBoostingClassifier(random_state=seed)
    if name == "xgboost":
        from vcl.models.boosting import xgboost

        return xgboost("dc.interpretable", seed)
    if name.startswith("sklearn:"):
        est = _estimator(name, "dc.interpretable")
        from sklearn.linear_model._base import LinearClassifierMixin

        if not is_classifier(est) or not (
            hasattr(type(est), "feature_importances_") or isinstance(est, LinearClassifierMixin)
        ):
            raise VCLInputError(
                f"dc.interpretable={name!r} is not a classifier with feature_importances_ or coef_; "
                "use a tree, boosting or linear classifier."
            )
        if "random_state" in est.get_params():
            est.set_params(random_state=seed)
        return est
    raise VCLInputError(
        f"dc.interpretable={name!r} is unknown; use one of {', '.join(INTERPRETABLE_MODELS)} "
        "or sklearn:sklearn.<module>.<Class>."
    )


def importances(model, columns: list[int], num_features: int) -> np.ndarray:
    """The model's feature importances placed at its global ``columns`` (zero elsewhere)."""
    imp = getattr(model, "feature_importances_", None)
    if imp is None:
        imp = np.abs(np.atleast_2d(model.coef_)).sum(0)
    out = np.zeros(num_features)
    out[columns] = imp
    return out


def class_scores(model, X: np.ndarray, num_classes: int) -> np.ndarray:
    """(n, K) scores: class probabilities of a classifier, or a regressor's outputs for one-hot targets."""
    if is_classifier(model):
        out = np.zeros((X.shape[0], num_classes))
        out[:, model.classes_.astype(int)] = model.predict_proba(X)
        return out
    return np.asarray(model.predict(X), dtype=np.float64).reshape(X.shape[0], num_classes)


def fit_classes(model, X: np.ndarray, y: np.ndarray, num_classes: int):
    """Fit on labels (classifier) or on their one-hot matrix (regressor, the paper's ridge)."""
    if is_classifier(model):
        return model.fit(X, y)
    return model.fit(X, np.eye(num_classes)[y])


def collaboration_maps(anchor_reps: list[np.ndarray], dim: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Algorithm 1 step 7: Z = √r · (top ``dim`` left singular vectors of [X̃_1^anc, …, X̃_c^anc]) and
    G_i = argmin_G ‖Z − X̃_i^anc G‖_F for every row group i."""
    A = np.hstack(anchor_reps)
    r = A.shape[0]
    if not 1 <= dim <= min(A.shape):
        raise VCLInputError(f"dc.collab_dim={dim}; use 1..{min(A.shape)} for these anchor representations.")
    U = np.linalg.svd(A, full_matrices=False)[0]
    Z = U[:, :dim] * np.sqrt(r)
    return Z, [np.linalg.lstsq(Ai, Z, rcond=None)[0] for Ai in anchor_reps]
