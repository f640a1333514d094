"""What a config's settings mean on this machine, alike for Alice's coordinator and for a party where it runs: the
device a run asks for, one setting per organization, what every data module takes from the ``data`` group."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from vcl.datamodules.tabular import Resampling
from vcl.errors import VCLInputError

if TYPE_CHECKING:
    from vcl.config import RunConfig


def resolve_device(name: str, option: str = "run.device") -> torch.device:
    """The device ``name`` (``auto``: a GPU if one is visible) on this machine; one sentence naming ``option`` if it
    is no device or a GPU this machine does not have."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise VCLInputError(f"{option}={name!r} is not a device; use cpu, cuda, cuda:N or auto.") from None
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise VCLInputError(f"{option}={name!r} but no such CUDA device is visible; use cpu or auto.")
    return device


def per_organization(values: list, count: int, what: str, who: str = "organizations") -> list:
    """One setting for all organizations, or one each; ``gb-svm`` = GB for the first half, SVM after."""
    if len(values) == 1 and values[0] == "gb-svm":
        return ["gb"] * (count // 2) + ["svm"] * (count - count // 2)
    if len(values) == 1:
        return list(values) * count
    if len(values) != count:
        raise VCLInputError(f"{what} lists {len(values)} values for {count} {who}; give 1 or {count}.")
    return list(values)


def shared_data_options(config: RunConfig) -> dict:
    """What every data module takes from the ``data`` group alike."""
    d = config.data

    return {"dataset": d.dataset, "split_seed": d.split_seed, "test_fraction": d.test_fraction,
            "resample": Resampling(d.folds, d.fold, d.bootstrap)}  # fmt: skip
