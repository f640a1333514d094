"""Local learners: residual-fitting LightningModules, scikit-learn adapters, and ASCII's classifiers.

``build_learner`` turns a learner name from a config into a fresh learner for one organization and
round. Names: ``linear``, ``mlp`` (LightningModules), ``gb`` (GradientBoostingRegressor), ``svm``
(SVR), or ``sklearn:<module>.<Class>`` for any scikit-learn regressor with default arguments.
ASCII's weighted classifiers are built by ``build_classifier`` (:mod:`models.classifier`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from models.classifier import (
    CLASSIFIERS,
    ClassifierSettings,
    NetClassifier,
    SklearnClassifier,
    build_classifier,
    check_classifier_name,
    check_weighted,
)
from models.concurrent import concurrency_key, fit_concurrently
from models.residual import ResidualRegressor, build_mlp
from models.sklearn import SklearnRegressor
from vcl.errors import VCLInputError

LEARNERS = ("linear", "mlp", "gb", "svm")

__all__ = [
    "CLASSIFIERS",
    "LEARNERS",
    "ClassifierSettings",
    "NetClassifier",
    "SklearnClassifier",
    "build_classifier",
    "check_classifier_name",
    "check_weighted",
    "LearnerSettings",
    "ResidualRegressor",
    "SklearnRegressor",
    "build_learner",
    "build_mlp",
    "check_learner_name",
    "concurrency_key",
    "fit_concurrently",
]


@dataclass
class LearnerSettings:
    """Hyper-parameters for the LightningModule learners (defaults: GAL Table 9, UCI column)."""

    epochs: int = 100
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    milestones: tuple[int, ...] = (50,)
    gamma: float = 0.1
    batch_size: int = 1024
    grad_clip: float = 1.0
    hidden: tuple[int, ...] = field(default_factory=lambda: (64,))
    engine: str = "fast"
    accelerator: str = "auto"
    devices: int | str = 1
    precision: str = "32-true"


def check_learner_name(name: str) -> str:
    if name in LEARNERS:
        return name
    if name.startswith("sklearn:"):
        _import_estimator(name)
        return name
    raise VCLInputError(f"learner={name!r} is unknown; use one of {', '.join(LEARNERS)} or sklearn:<module>.<Class>.")


def _import_estimator(name: str):
    path = name.split(":", 1)[1]
    module, _, cls = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError, ValueError) as err:
        raise VCLInputError(f"learner={name!r}: cannot import {path} ({err}); give a full class path.") from None


def build_learner(name: str, in_features: int, out_features: int, loss: str, seed: int, settings: LearnerSettings):
    """A fresh learner for one organization and round."""
    if name in ("linear", "mlp"):
        hidden = () if name == "linear" else tuple(settings.hidden)
        return ResidualRegressor(
            in_features,
            out_features,
            hidden=hidden,
            loss=loss,
            lr=settings.lr,
            momentum=settings.momentum,
            weight_decay=settings.weight_decay,
            epochs=settings.epochs,
            milestones=tuple(settings.milestones),
            gamma=settings.gamma,
            batch_size=settings.batch_size,
            grad_clip=settings.grad_clip,
            seed=seed,
            engine=settings.engine,
            accelerator=settings.accelerator,
            devices=settings.devices,
            precision=settings.precision,
        )
    if name == "gb":
        from sklearn.ensemble import GradientBoostingRegressor

        gb_loss = {"l1": "absolute_error", "l2": "squared_error"}.get(loss, "squared_error")
        return SklearnRegressor(GradientBoostingRegressor(loss=gb_loss), seed=seed)
    if name == "svm":
        from sklearn.svm import SVR

        return SklearnRegressor(SVR(), seed=seed)
    return SklearnRegressor(_import_estimator(check_learner_name(name))(), seed=seed)
