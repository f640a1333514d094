"""MPDL's options as the run decides them, the parties' names, and the optimizer and code width every side uses."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from vcl.config import MPDLGroup, RunConfig
from vcl.config.resolve import resolve_device
from vcl.engine.loop import Steps, seeded_init
from vcl.models import build_mlp

PARTIES = ("a", "b")


@dataclass
class MPDLOptions(MPDLGroup):
    """The ``mpdl`` options and what the run decides: Algorithm 1's iterations (``mpdl.max_iterations`` capped by
    ``run.rounds``) and the parties' and C's device (PSI, Paillier and scoring stay on the CPU)."""

    iterations: int = 2
    device: str = "cpu"


def ftl_code_dim(options: MPDLOptions, dims: dict[str, int]) -> int:
    return options.ftl_dim or min(64, max(2, min(dims.values()) // 2))


def sgd(params, options: MPDLOptions, clip: bool = False) -> Steps:
    """Plain SGD at the paper's rate; ``clip``: the gradient norm clipped to ``mpdl.dual_clip`` if > 0 (FTL:
    the dual models' local choice)."""
    return Steps(torch.optim.SGD(params, lr=options.lr), clip=options.dual_clip if clip else 0.0)


def seeded_mlp(d_in: int, d_out: int, hidden: int, seed: int) -> torch.nn.Sequential:
    """The one-hidden-layer MLP every side builds (dual models, FTL's autoencoders, C's classifier), from ``seed``."""
    with seeded_init(seed):
        return build_mlp(d_in, d_out, (hidden,))


def options_of(config: RunConfig) -> MPDLOptions:
    iterations = min(config.mpdl.max_iterations, config.run.rounds)
    device = str(resolve_device(config.run.device))
    return MPDLOptions(**dataclasses.asdict(config.mpdl), iterations=iterations, device=device)
