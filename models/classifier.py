"""Classifiers for ASCII's Weighted Supervised Training (Algorithm 2): ``fit(features, classes, sample_weight)``
and ``predict(features) -> classes``.

- :class:`SklearnClassifier`: any scikit-learn classifier (decision tree, random forest, logistic
  regression, gradient boosting, SVC, ...); the sample weights go to its ``fit``. One whose ``fit``
  takes none is refused with a clear error, or fit on a weighted resample of the rows when asked.
- :class:`NetClassifier`: the Linear/MLP residual learner (a LightningModule), or the user's own
  LightningModule, trained with a per-sample weighted cross-entropy (the residual learners' machinery with
  loss ``ce`` on one-hot targets).

The weights are rescaled to mean one before they reach a learner, so an estimator's regularization
(logistic regression's ``C``, a tree's leaf sizes) means what it means unweighted; SAMME's α and the
fitted trees do not depend on that scale.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from vcl.models.residual import ResidualRegressor
from vcl.models.user import check_module, is_module_spec

from vcl.engine.losses import one_hot
from vcl.errors import VCLInputError

CLASSIFIERS = ("linear", "mlp", "tree", "forest", "logistic", "gb", "svm")


@dataclass
class ClassifierSettings:
    """What the scikit-learn classifiers take beyond their defaults; ``resample`` is the WST fallback."""

    max_depth: int | None = None
    n_trees: int = 100
    resample: bool = False


def check_model_name(name: str, known, unknown: str) -> str:
    """``name`` if it is one of ``known``, a user's LightningModule (imported now) or a scikit-learn class (made
    now, its init args checked); else the sentence ``unknown``."""
    if name in known:
        return name
    if is_module_spec(name):
        return check_module(name)
    if name.startswith("sklearn:"):
        from vcl.models.sklearn import make_estimator

        make_estimator(name, "learner.model")
        return name
    raise VCLInputError(unknown)


def check_classifier_name(name: str) -> str:
    return check_model_name(
        name,
        CLASSIFIERS,
        f"learner.model={name!r} is not a classifier; for ASCII use one of {', '.join(CLASSIFIERS)}, "
        "sklearn:sklearn.<module>.<Class> or {class_path: <your LightningModule>}.",
    )


def check_weighted(name: str, resample: bool) -> None:
    """Refuse, before any work, a scikit-learn classifier whose ``fit`` takes no sample_weight (unless resampling)."""
    if name in ("linear", "mlp") or is_module_spec(name) or resample:
        return
    est = _estimator(name, ClassifierSettings())
    if not takes_sample_weight(est):
        raise VCLInputError(
            f"learner.model={name!r}: {type(est).__name__}.fit takes no sample_weight, which ASCII's weighted training "
            "needs; choose a classifier that does or set ascii.resample: true to fit on a weighted resample."
        )


def _estimator(name: str, settings: ClassifierSettings):
    if name == "tree":
        from sklearn.tree import DecisionTreeClassifier

        return DecisionTreeClassifier(max_depth=settings.max_depth)
    if name == "forest":
        from sklearn.ensemble import RandomForestClassifier

        return RandomForestClassifier(n_estimators=settings.n_trees, max_depth=settings.max_depth, n_jobs=1)
    if name == "logistic":
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(solver="newton-cg", max_iter=1000)
    if name == "gb":
        from sklearn.ensemble import GradientBoostingClassifier

        return GradientBoostingClassifier(max_depth=settings.max_depth or 3)
    if name == "svm":
        from sklearn.svm import SVC

        return SVC()
    from vcl.models.sklearn import make_estimator

    return make_estimator(check_classifier_name(name), "learner.model")


def build_classifier(name: str, in_features: int, num_classes: int, seed: int, settings, tree: ClassifierSettings):
    """A fresh classifier for one agent and round; ``settings`` (models.LearnerSettings) configure the torch ones."""
    if name in ("linear", "mlp"):
        return NetClassifier(in_features, num_classes, seed=seed, **settings.fit_kwargs(name))
    if is_module_spec(name):  # the user's LightningModule, its outputs read as class logits
        return NetClassifier(
            in_features, num_classes, seed=seed, arch="module", module=name, **settings.fit_kwargs(name)
        )
    return SklearnClassifier(_estimator(name, tree), seed=seed, resample=tree.resample)


def takes_sample_weight(estimator) -> bool:
    return "sample_weight" in inspect.signature(estimator.fit).parameters


def weighted_resample(sample_weight: np.ndarray, seed: int) -> np.ndarray:
    """Row indices drawn with replacement, n of them, with probabilities proportional to the weights."""
    p = np.asarray(sample_weight, dtype=np.float64)
    p = p / p.sum()
    return np.random.RandomState(seed % (2**32)).choice(len(p), size=len(p), replace=True, p=p)


def mean_one(sample_weight: Tensor) -> Tensor:
    """Weights rescaled to mean one (their relative sizes are what WST uses)."""
    w = sample_weight.detach().to(torch.float64)
    return w * (w.numel() / w.sum().clamp_min(1e-300))


class SklearnClassifier:
    """Wraps an unfitted scikit-learn classifier; each ``fit`` fits a fresh clone."""

    def __init__(self, estimator, seed: int | None = None, resample: bool = False):
        self.estimator = estimator
        self.seed = seed
        self.resample = resample
        self.fitted_ = None

    def fit(self, features: Tensor, targets: Tensor, sample_weight: Tensor | None = None):
        from sklearn.base import clone

        est = clone(self.estimator)
        seed = int(self.seed or 0) % (2**32)
        if self.seed is not None and "random_state" in est.get_params():
            est.set_params(random_state=seed)
        x = features.detach().cpu().numpy()
        y = targets.detach().cpu().numpy().astype(np.int64).reshape(-1)
        if sample_weight is None:
            est.fit(x, y)
        elif takes_sample_weight(est):
            est.fit(x, y, sample_weight=mean_one(sample_weight).cpu().numpy())
        elif self.resample:
            rows = weighted_resample(sample_weight.detach().cpu().numpy(), seed)
            est.fit(x[rows], y[rows])
        else:
            raise VCLInputError(
                f"{type(est).__name__}.fit takes no sample_weight, which ASCII's weighted training needs; "
                "choose a classifier that does or set ascii.resample: true to fit on a weighted resample."
            )
        self.fitted_ = est
        return self

    def predict(self, features: Tensor) -> Tensor:
        out = np.asarray(self.fitted_.predict(features.detach().cpu().numpy()), dtype=np.int64)
        return torch.from_numpy(out).to(features.device)

    def state_dict(self) -> dict:
        from vcl.models.sklearn import dump_estimator

        return {"estimator": dump_estimator(self.fitted_)}

    def load_state_dict(self, state: dict) -> None:
        from vcl.models.sklearn import load_estimator

        self.fitted_ = load_estimator(state["estimator"])


class NetClassifier(ResidualRegressor):
    """Linear (``hidden=()``) or MLP logits trained with the per-sample weighted cross-entropy."""

    def __init__(self, in_features: int, num_classes: int, **kwargs):
        super().__init__(in_features, num_classes, loss="ce", **kwargs)

    def fit(self, features: Tensor, targets: Tensor, sample_weight: Tensor | None = None):
        w = None if sample_weight is None else mean_one(sample_weight).to(features.device, torch.float32)
        return super().fit(features, one_hot(targets, self.hparams.out_features).to(features.device), w)

    @torch.no_grad()
    def predict(self, features: Tensor) -> Tensor:
        return super().predict(features).argmax(-1)
