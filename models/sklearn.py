"""Any scikit-learn regressor as a local learner (GAL's model autonomy: GB, SVM, ...).

Multi-output targets go through scikit-learn's own ``MultiOutputRegressor`` when the estimator cannot
fit several outputs itself. Sample weights are passed to ``fit``; an estimator whose ``fit`` takes
none is refused with a clear error.

Also the two safety rules for estimators: a config may name only scikit-learn classes
(``sklearn:sklearn.<module>.<Class>``), and a fitted estimator is stored with ``skops.io``, which loads
without running code; a stored estimator holding a type outside scikit-learn (and DC's XGBoost,
:mod:`vcl.models.boosting`) is refused on load.
"""

from __future__ import annotations

import inspect

import numpy as np
import torch
from torch import Tensor

from vcl.classpath import import_class, parse_spec
from vcl.errors import VCLInputError

TRUSTED_PREFIX = "sklearn."  # the only package whose classes a config may name or a stored estimator may hold


def make_estimator(spec: str, option: str):
    """A fresh estimator of the scikit-learn class ``spec`` names, with its init args."""
    path, args = parse_spec(spec, option)
    try:
        estimator = estimator_class(spec, option)(**args)
    except TypeError as err:
        raise VCLInputError(f"{option}: {path} does not take these init_args {args} ({err}).") from None
    try:  # scikit-learn's own check of the values, which it would otherwise run only when fitting
        validate = getattr(estimator, "_validate_params", None)
        if validate is not None:
            validate()
    except (TypeError, ValueError) as err:
        reason = str(err).strip().splitlines()[0][:300].rstrip(".")
        raise VCLInputError(f"{option}: {path} refuses its init_args {args} ({reason}); fix those values.") from None
    return estimator


def estimator_class(spec: str, option: str) -> type:
    """The class named by ``sklearn:sklearn.<module>.<Class>``; anything outside scikit-learn is refused
    before it is imported (importing a module runs its code)."""
    path = parse_spec(spec, option)[0]
    if not path.rpartition(".")[0].startswith(TRUSTED_PREFIX):
        raise VCLInputError(
            f"{option}={spec!r}: only scikit-learn classes may be named (sklearn:sklearn.<module>.<Class>); "
            "use one from scikit-learn."
        )
    from sklearn.base import BaseEstimator

    return import_class(path, option, BaseEstimator, "scikit-learn estimator")


def dump_estimator(obj) -> Tensor:
    """Fitted estimators (or tuples, lists and dicts of them and of arrays) as skops bytes in a uint8 tensor:
    data a checkpoint can hold and load with ``torch.load(weights_only=True)``."""
    import skops.io

    return torch.frombuffer(bytearray(skops.io.dumps(obj, compression=8)), dtype=torch.uint8)


def load_estimator(blob: Tensor):
    """The inverse of :func:`dump_estimator`. skops builds objects without running code; every type it does
    not trust by default must come from scikit-learn, or the blob is refused."""
    import skops.io

    if not isinstance(blob, Tensor) or blob.dtype != torch.uint8:
        raise VCLInputError("a stored estimator is not skops bytes; the checkpoint is damaged or foreign.")
    data = blob.numpy().tobytes()
    try:
        untrusted = skops.io.get_untrusted_types(data=data)
    except Exception as err:  # a damaged or foreign archive
        raise VCLInputError(
            f"a stored estimator cannot be read ({type(err).__name__}); the checkpoint is damaged."
        ) from None
    from vcl.models.boosting import TYPES  # DC's XGBoost: its adapter and XGBoost's classifier and booster

    foreign = [t for t in untrusted if not t.startswith(TRUSTED_PREFIX) and t not in TYPES]
    if foreign:
        raise VCLInputError(
            f"a stored estimator holds types outside scikit-learn ({', '.join(foreign)}); refusing to load it."
        )
    return skops.io.loads(data, trusted=untrusted)


def _supports_multi_output(estimator) -> bool:
    try:
        from sklearn.utils import get_tags

        return bool(get_tags(estimator).target_tags.multi_output)
    except (ImportError, AttributeError):  # older scikit-learn
        return bool(getattr(estimator, "_get_tags", dict)().get("multioutput", False))


class SklearnRegressor:
    """Wraps an unfitted scikit-learn regressor; each ``fit`` fits a fresh clone."""

    def __init__(self, estimator, seed: int | None = None):
        self.estimator = estimator
        self.seed = seed
        self.fitted_ = None
        self.out_features_ = None
        self._stored = None  # the fitted estimator's skops bytes, made once (a fitted model never changes)

    def fit(self, features: Tensor, targets: Tensor, sample_weight: Tensor | None = None):
        from sklearn.base import clone
        from sklearn.multioutput import MultiOutputRegressor

        est = clone(self.estimator)
        if self.seed is not None and "random_state" in est.get_params():
            est.set_params(random_state=int(self.seed) % (2**32))
        x = features.detach().cpu().numpy()
        y = targets.detach().cpu().numpy()
        self.out_features_ = y.shape[1]
        if y.shape[1] == 1:
            y = y[:, 0]
        elif not _supports_multi_output(est):
            est = MultiOutputRegressor(est)
        kwargs = {}
        if sample_weight is not None:
            inner = est.estimator if isinstance(est, MultiOutputRegressor) else est
            if "sample_weight" not in inspect.signature(inner.fit).parameters:
                raise VCLInputError(
                    f"{type(inner).__name__}.fit takes no sample_weight; choose an estimator that does."
                )
            kwargs["sample_weight"] = sample_weight.detach().cpu().numpy()
        est.fit(x, y, **kwargs)
        self.fitted_, self._stored = est, None
        return self

    def predict(self, features: Tensor) -> Tensor:
        out = np.asarray(self.fitted_.predict(features.detach().cpu().numpy()), dtype=np.float32)
        return torch.from_numpy(out.reshape(out.shape[0], self.out_features_)).to(features.device)

    def state_dict(self) -> dict:
        if self._stored is None:
            self._stored = dump_estimator(self.fitted_)
        return {"estimator": self._stored, "out_features": self.out_features_}

    def load_state_dict(self, state: dict) -> None:
        self.fitted_, self.out_features_ = load_estimator(state["estimator"]), state["out_features"]
        self._stored = state["estimator"]
