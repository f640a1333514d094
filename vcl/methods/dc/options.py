"""DC's options as the run decides them, and the names its parts go by."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from torch import Tensor

from vcl.config import DCGroup, RunConfig

REDUCTIONS = ("pca", "tsvd", "identity")
CENTRAL_MODELS = ("ridge", "gb", "xgboost")
INTERPRETABLE_MODELS = ("tree", "gb", "xgboost")
MASTER = "master"


@dataclass
class DCOptions(DCGroup):
    """The ``dc`` options and the anchor construction the method names (``dc_smote`` → ``smote``)."""

    anchor: str = "smote"


def _np(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def dc_options(config: RunConfig, method: str) -> DCOptions:
    return DCOptions(**asdict(config.dc), anchor=method.removeprefix("dc_"))
