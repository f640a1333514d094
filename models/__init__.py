"""Local learners: residual-fitting LightningModules, scikit-learn adapters, and ASCII's classifiers.

``build_learner`` turns a learner name from a config into a fresh learner for one organization and
round. Names: ``linear``, ``mlp``, ``cnn`` (GAL Table 8), ``lstm`` (LightningModules; ``run.engine:
trainer`` trains them with Lightning's Trainer), ``gb`` (GradientBoostingRegressor), ``svm`` (SVR),
``sklearn:sklearn.<module>.<Class>`` for any scikit-learn regressor, or ``module:<package.module.Class>`` for
the user's own LightningModule (:mod:`vcl.models.user`). Unset optimizer settings take the paper's value for
the learner (GAL Table 9): Linear/MLP SGD lr 0.1, batch 1024, 100 epochs, ×0.1 at epoch 50; CNN SGD lr 0.1,
batch 512, 10 epochs; LSTM Adam lr 1e-3, batch 8, 10 epochs; a user's module the MLP's. ASCII's weighted
classifiers are built by ``build_classifier`` (:mod:`vcl.models.classifier`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from vcl.models.classifier import (
    CLASSIFIERS,
    ClassifierSettings,
    NetClassifier,
    SklearnClassifier,
    build_classifier,
    check_classifier_name,
    check_model_name,
    check_weighted,
)
from vcl.models.dms import RoundHead, SharedExtractorRegressor
from vcl.models.networks import build_mlp, build_network
from vcl.models.residual import ResidualRegressor
from vcl.models.sklearn import SklearnRegressor, make_estimator
from vcl.models.user import is_module_spec

from vcl.engine.concurrent import LinearRound, concurrency_key, fit_and_predict, fit_concurrently, fit_linear_rounds
from vcl.errors import VCLInputError

LEARNERS = ("linear", "mlp", "cnn", "lstm", "gb", "svm")
DEEP = {"linear": "mlp", "mlp": "mlp", "cnn": "cnn", "lstm": "lstm"}  # learner name → network architecture


def deep_arch(name: str) -> str | None:
    """The network architecture of a torch learner (``module`` for a user's LightningModule); None for others."""
    return "module" if is_module_spec(name) else DEEP.get(name)


PAPER_DEFAULTS = {
    "mlp": dict(epochs=100, lr=0.1, batch_size=1024, milestones=(50,), optimizer="sgd"),
    "cnn": dict(epochs=10, lr=0.1, batch_size=512, milestones=(), optimizer="sgd"),
    "lstm": dict(epochs=10, lr=1e-3, batch_size=8, milestones=(), optimizer="adam"),
}
PAPER_DEFAULTS["module"] = PAPER_DEFAULTS["mlp"]  # a user's LightningModule: the MLP's settings where unset

__all__ = [
    "DEEP",
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
    "RoundHead",
    "SharedExtractorRegressor",
    "SklearnRegressor",
    "build_learner",
    "build_mlp",
    "build_network",
    "check_learner_loss",
    "check_learner_name",
    "deep_arch",
    "concurrency_key",
    "fit_and_predict",
    "fit_linear_rounds",
    "learner_prototype",
    "LinearRound",
    "fit_concurrently",
]


# what every torch learner takes from the settings as they are (LearnerSettings.fit_kwargs)
_FIT_KEYS = ("lr", "momentum", "weight_decay", "epochs", "gamma", "batch_size", "shuffle", "grad_clip")
_FIT_KEYS += ("engine", "accelerator", "devices", "precision")


@dataclass
class LearnerSettings:
    """Hyper-parameters for the LightningModule learners; ``None`` takes the paper's value for the learner.
    ``callbacks``: Lightning callbacks (``callback:<class_path>{init args}``) for ``engine: trainer`` fits."""

    epochs: int | None = None
    lr: float | None = None
    momentum: float = 0.9
    weight_decay: float = 5e-4
    milestones: tuple[int, ...] | None = None
    gamma: float = 0.1
    batch_size: int | None = None
    optimizer: str | None = None
    grad_clip: float = 1.0
    shuffle: str = "rows"  # the batches' order (learner.shuffle): rows, or blocks of the rows permuted once per fit
    hidden: tuple[int, ...] = field(default_factory=lambda: (64,))
    widths: tuple[int, ...] = (64, 128, 256, 512)
    last_pool: bool = True  # CNN: max-pool after the last conv block too (GAL Table 8); False: the authors' code
    lstm_hidden: int = 128
    dropout: float = 0.3
    engine: str = "fast"
    accelerator: str = "auto"
    devices: int | str = 1
    strategy: str = "auto"
    precision: str = "32-true"
    dms: bool = False  # Deep Model Sharing: one extractor per organization across rounds
    callbacks: tuple[str, ...] = ()

    def resolved(self, arch: str) -> LearnerSettings:
        """These settings with every unset value filled from :data:`PAPER_DEFAULTS` for ``arch``."""
        defaults = PAPER_DEFAULTS[arch]
        return replace(self, **{k: v for k, v in defaults.items() if getattr(self, k) is None})

    def fit_kwargs(self, name: str) -> dict:
        """What every torch learner ``name`` (linear, mlp, a user's module, or for the residual learners cnn, lstm)
        takes from these settings: its hidden layers, optimizer steps and schedule, engine and hardware (unset
        values: the paper's for its architecture)."""
        s = self.resolved(deep_arch(name))
        hidden = () if name == "linear" else tuple(s.hidden)
        return {k: getattr(s, k) for k in _FIT_KEYS} | {"hidden": hidden, "milestones": tuple(s.milestones)}


# local loss → GradientBoostingRegressor's loss. scikit-learn has no ℓ1.5 or ℓ4; "ce" is Late fusion fitting the
# one-hot labels, which a regressor does with squared error.
GB_LOSSES = {"l1": "absolute_error", "l2": "squared_error", "ce": "squared_error"}


def check_learner_loss(name: str, loss: str, where: str = "") -> None:
    """Refuse a local loss the learner cannot fit (GB: only ℓ1 and ℓ2), rather than fit another one."""
    if name == "gb" and loss not in GB_LOSSES:
        raise VCLInputError(
            f"learner.model=gb{where} cannot fit gal.local_loss={loss}: scikit-learn's "
            f"GradientBoostingRegressor offers "
            "l1 (absolute error) and l2 (squared error) only; give that organization local_loss l1 or l2, "
            "or a torch learner (linear, mlp) for l1.5 and l4."
        )


def check_learner_name(name: str) -> str:
    return check_model_name(
        name,
        LEARNERS,
        f"learner.model={name!r} is unknown; use one of {', '.join(LEARNERS)}, sklearn:sklearn.<module>.<Class> or "
        "{class_path: <your LightningModule>}.",
    )


def build_learner(
    name: str, in_shape, out_features: int, loss: str, seed: int, settings: LearnerSettings, shared: bool = False
):
    """A fresh learner for one organization and round (``shared``: a Deep Model Sharing learner).

    ``in_shape`` is the shape of one example: ``(d,)`` for rows (an int is read as ``(d,)``), ``(C, H, W)``
    for images, ``(T, F)`` for sequences.
    """
    in_shape = (in_shape,) if isinstance(in_shape, int) else tuple(in_shape)
    if deep_arch(name) and not shared:  # copies of a prototype's modules (ResidualRegressor.renewed)
        return learner_prototype(name, in_shape, out_features, loss, settings).renewed(seed)
    if deep_arch(name):
        return _deep_learner(name, in_shape, out_features, loss, seed, settings, shared)
    if shared:
        raise VCLInputError(
            f"gal.dms=true needs a deep learner (linear, mlp, cnn or lstm), not learner.model={name!r}."
        )
    if len(in_shape) > 1:
        raise VCLInputError(
            f"learner.model={name!r} takes rows of features, but this organization holds examples of shape {in_shape}; "
            "use cnn (images), lstm (sequences), linear or mlp."
        )
    if name == "gb":
        from sklearn.ensemble import GradientBoostingRegressor

        check_learner_loss(name, loss)
        return SklearnRegressor(GradientBoostingRegressor(loss=GB_LOSSES[loss]), seed=seed)
    if name == "svm":
        from sklearn.svm import SVR

        return SklearnRegressor(SVR(), seed=seed)
    return SklearnRegressor(make_estimator(check_learner_name(name), "learner.model"), seed=seed)


def learner_prototype(name: str, in_shape, out_features: int, loss: str, settings: LearnerSettings):
    """The learner (on the meta device) whose :meth:`ResidualRegressor.renewed` copies :func:`build_learner` gives
    for a torch learner ``name`` (not Deep Model Sharing's); None for other learners. Kept for the last 64 kinds."""
    if not deep_arch(name):
        return None
    in_shape = (in_shape,) if isinstance(in_shape, int) else tuple(in_shape)
    values = vars(settings).values()  # the fields, in order
    key = (name, in_shape, out_features, loss, *(tuple(v) if isinstance(v, list) else v for v in values))
    prototype = _PROTOTYPES.get(key)
    if prototype is None:
        if len(_PROTOTYPES) >= 64:
            _PROTOTYPES.pop(next(iter(_PROTOTYPES)))
        prototype = _deep_learner(name, in_shape, out_features, loss, 0, settings).to("meta")
        concurrency_key(prototype)  # computed once: its copies keep it
        _PROTOTYPES[key] = prototype
    return prototype


_PROTOTYPES: dict[tuple, ResidualRegressor] = {}  # the last 64 kinds of learner built, on the meta device


def _deep_learner(name: str, in_shape: tuple, out_features: int, loss: str, seed: int, settings, shared=False):
    arch = deep_arch(name)
    s = settings.resolved(arch)
    own = {k: getattr(s, k) for k in ("optimizer", "lstm_hidden", "dropout", "strategy", "last_pool")}
    own["module"] = name if arch == "module" else ""
    cls = SharedExtractorRegressor if shared else ResidualRegressor
    shape = in_shape if len(in_shape) > 1 else in_shape[0]
    return cls(
        shape, out_features, loss=loss, seed=seed, arch=arch, widths=tuple(s.widths), **own, **settings.fit_kwargs(name)
    )
