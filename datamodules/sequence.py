"""Time series whose feature groups belong to different organizations (GAL's MIMIC setup: four groups).

Each example is a sequence (T × F); organization m holds the columns of its feature group at every
time step, aligned by the shared time stamps. Sources: arrays in a ``.npz`` file (``X``: N × T × F,
``y``: N, optional ``groups``: F organization indices, optional ``task``), or a seeded synthetic
generator whose label depends on every group, so no organization can learn it alone.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch
from vcl.datamodules.tabular import (
    FeatureView,
    Resampling,
    VerticalData,
    VerticalDataModule,
    check_fractions,
    random_column_split,
    seeded_row_splits,
)

from vcl.errors import VCLInputError, regular_file
from vcl.registry import datasets_of

SEQUENCE_DATASETS = datasets_of("sequence")  # the registry's


def synthetic_sequences(
    n: int = 2000, steps: int = 24, groups: int = 4, features: int = 3, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sequences with one AR(1) latent signal per feature group, seen through noisy features.

    The binary label is whether the groups' latents, averaged over the second half of the sequence,
    sum to more than zero: each group carries an equal share of the signal.
    Returns ``X`` (n × steps × groups·features), ``y`` (n), ``groups`` (the owner of each feature).
    """
    rng = np.random.RandomState(seed)
    z = np.zeros((n, steps, groups))
    z[:, 0] = rng.randn(n, groups)
    for t in range(1, steps):
        z[:, t] = 0.8 * z[:, t - 1] + 0.6 * rng.randn(n, groups)
    loadings = rng.uniform(0.5, 1.5, size=(groups, features)) * rng.choice([-1, 1], size=(groups, features))
    x = np.einsum("ntg,gf->ntgf", z, loadings) + 0.5 * rng.randn(n, steps, groups, features)
    y = (z[:, steps // 2 :].mean(1).sum(1) > 0).astype(np.int64)
    return x.reshape(n, steps, groups * features).astype(np.float32), y, np.repeat(np.arange(groups), features)


def load_npz(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
    p = Path(path)
    regular_file(p, "data.dataset=npz: data.root", "point it at an .npz file with X and y")
    fix = "save numeric arrays X (N×T×F) and y (N) with numpy.savez"
    with open(p, "rb") as f:
        magic = f.read(6)
    if not magic.startswith((b"PK\x03\x04", b"PK\x05\x06", b"\x93NUMPY")):  # a zip (.npz) or an .npy
        raise VCLInputError(f"{p} is not an .npz file (numpy's zip of arrays); {fix}.")
    try:
        loaded = np.load(p, allow_pickle=False)
        if not hasattr(loaded, "files"):
            raise VCLInputError(f"{p} holds one array (an .npy file), not an .npz of X and y; {fix}.")
        with loaded as f:
            missing = {"X", "y"} - set(f.files)
            if missing:
                raise VCLInputError(f"{p}: missing array(s) {', '.join(sorted(missing))}; {fix}.")
            x, y = f["X"], f["y"]
            groups = f["groups"] if "groups" in f.files else None
            task = (
                str(f["task"]) if "task" in f.files else ("classification" if y.dtype.kind in "iub" else "regression")
            )
    except VCLInputError:
        raise
    except (ValueError, TypeError, OSError, EOFError, zipfile.BadZipFile) as err:  # damaged, objects
        reason = str(err).strip().splitlines()[0][:160].rstrip(".") if str(err).strip() else type(err).__name__
        raise VCLInputError(f"{p} cannot be read as an .npz of plain arrays ({reason}); {fix}.") from None
    for name, array in (("X", x), ("y", y), ("groups", groups)):
        if array is not None and array.dtype.kind not in "biuf":
            raise VCLInputError(f"{p}: {name} holds {array.dtype} values, not numbers; {fix}.")
    if x.ndim != 3:
        raise VCLInputError(f"{p}: X has shape {x.shape}; sequences need N × T × F.")
    if y.shape != (x.shape[0],):
        raise VCLInputError(f"{p}: y has shape {y.shape} for {x.shape[0]} sequences; give one label per sequence.")
    if not np.isfinite(x).all():
        raise VCLInputError(f"{p}: X has NaN or infinite values; impute them first.")
    if groups is not None and groups.shape != (x.shape[2],):
        raise VCLInputError(f"{p}: groups has shape {groups.shape}; give one organization index per feature.")
    if task not in ("classification", "regression"):
        raise VCLInputError(f"{p}: data.task={task!r}; use classification or regression.")
    return x.astype(np.float32), y, groups, task


class SequenceDataModule(VerticalDataModule):
    def __init__(
        self,
        dataset: str = "sequence_synthetic",
        organizations: int = 4,
        root: str = "",
        feature_seed: int = 0,
        split_seed: int = 0,
        test_fraction: float = 0.2,
        resample: Resampling | None = None,
        val_fraction: float = 0.0,
        size: int = 2000,
        batch_size: int = 8,
    ):
        if dataset not in SEQUENCE_DATASETS:
            raise VCLInputError(f"data.dataset={dataset!r}; sequence datasets are {', '.join(SEQUENCE_DATASETS)}.")
        check_fractions(test_fraction, val_fraction)
        super().__init__()
        self.dataset, self.organizations, self.root = dataset, organizations, root
        self.feature_seed, self.split_seed, self.size = feature_seed, split_seed, size
        self.test_fraction, self.val_fraction, self.batch_size = test_fraction, val_fraction, batch_size
        self.resample = resample or Resampling()
        self.data: VerticalData | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.data is not None:
            return
        if self.dataset == "npz":
            x, y, groups, task = load_npz(self.root)
        else:
            x, y, groups = synthetic_sequences(self.size, groups=self.organizations, seed=self.split_seed)
            task = "classification"
        self.data = self.split(x, y, groups, task)

    def split(self, x: np.ndarray, y: np.ndarray, groups: np.ndarray | None, task: str) -> VerticalData:
        if groups is None:
            cols = random_column_split(x.shape[2], self.organizations, self.feature_seed)
        else:
            owners = sorted(set(groups.tolist()))
            cols = [[i for i, g in enumerate(groups.tolist()) if g == o] for o in owners]
        rows = seeded_row_splits(
            x.shape[0], self.split_seed, self.test_fraction, self.val_fraction, None, self.resample
        )
        train = x[rows["train"]]
        mean, std = train.mean((0, 1)), train.std((0, 1))
        std[std == 0] = 1.0
        x = (x - mean) / std
        names = ["alice"] + [f"org{m}" for m in range(1, len(cols))]
        views = [
            FeatureView(
                name, [f"x{i}" for i in c], {s: torch.from_numpy(x[r][:, :, c].copy()) for s, r in rows.items()}
            )
            for name, c in zip(names, cols, strict=True)
        ]
        if task == "classification":
            labels = {s: torch.from_numpy(y[r].astype(np.int64)) for s, r in rows.items()}
            num_classes = int(y.max()) + 1
        else:
            labels = {s: torch.from_numpy(y[r].astype(np.float32)) for s, r in rows.items()}
            num_classes = 1
        return VerticalData(views, labels, task, num_classes)
