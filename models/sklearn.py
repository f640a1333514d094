"""Any scikit-learn regressor as a local learner (GAL's model autonomy: GB, SVM, ...).

Multi-output targets go through scikit-learn's own ``MultiOutputRegressor`` when the estimator cannot
fit several outputs itself. Sample weights are passed to ``fit``; an estimator whose ``fit`` takes
none is refused with a clear error.
"""

from __future__ import annotations

import inspect
import pickle

import numpy as np
import torch
from sklearn.base import clone
from sklearn.multioutput import MultiOutputRegressor
from torch import Tensor

from vcl.errors import VCLInputError


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

    def fit(self, features: Tensor, targets: Tensor, sample_weight: Tensor | None = None):
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
        self.fitted_ = est
        return self

    def predict(self, features: Tensor) -> Tensor:
        out = np.asarray(self.fitted_.predict(features.detach().cpu().numpy()), dtype=np.float32)
        return torch.from_numpy(out.reshape(out.shape[0], self.out_features_)).to(features.device)

    def state_dict(self) -> dict:
        return {"pickle": pickle.dumps((self.fitted_, self.out_features_))}

    def load_state_dict(self, state: dict) -> None:
        self.fitted_, self.out_features_ = pickle.loads(state["pickle"])
