"""The central model at the collaborator C as a split network (MPDL Section III-B2 / III-C3, Figure 3): each
party holds the bottom layer on its own columns (:class:`CanvasConv` for ``arch="cnn"``), C the rest; parties send
:class:`Activations`, C sends back :class:`ActivationGradient` (eq. 18). Layers: docs/mpdl.md ("Pieces")."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from vcl.engine.loop import Steps, build_optimizer, seeded_init
from vcl.messages import ValuesMessage, as_float


# --- the messages of this protocol step (each declares its tensors once; see vcl.messages) ---
@dataclass(frozen=True)
class Activations(ValuesMessage):
    """Split network (MPDL Section III-C3, FTL): a party's bottom-layer outputs z = x·W (or its shared
    representation) on a minibatch, party → collaborator."""

    tensors = {"activations": "values"}


@dataclass(frozen=True)
class ActivationGradient(ValuesMessage):
    """Split network: the errors δ of the collaborator's first layer w.r.t. a party's activations (eq. 18)."""

    tensors = {"gradient": "values"}


COLLABORATOR = "collaborator"


def _seeded(seed: int, make):
    with seeded_init(seed):
        return make()


class CanvasConv(nn.Module):
    """A party's bottom layer of the central (or dual) CNN: its pixels (flat positions ``pixels`` of a
    C × H × W image) placed on a zero canvas, then a ``kernel`` × ``kernel`` convolution (same padding)."""

    def __init__(self, shape: tuple[int, int, int], pixels, channels: int = 16, kernel: int = 5, bias: bool = False):
        super().__init__()
        self.shape = tuple(int(v) for v in shape)
        self.register_buffer("pixels", torch.as_tensor(np.asarray(pixels), dtype=torch.long))
        self.conv = nn.Conv2d(self.shape[0], channels, kernel, padding=kernel // 2, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        canvas = x.new_zeros(x.shape[0], math.prod(self.shape))
        canvas[:, self.pixels] = x
        return self.conv(canvas.view(-1, *self.shape))


def cnn_top(shape: tuple[int, int, int], classes: int, hidden: int = 128, channels: int = 16) -> nn.Sequential:
    """C's part of the paper's MNIST CNN above the parties' first convolution (bias added before it)."""
    trunk = nn.Sequential(
        nn.ReLU(),
        nn.MaxPool2d(2, ceil_mode=True),
        nn.Conv2d(channels, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2, ceil_mode=True),
        nn.Flatten(),
    )
    return _with_head(trunk, shape, channels, hidden, classes)


def _with_head(trunk: nn.Sequential, shape, channels: int, hidden: int, classes: int) -> nn.Sequential:
    """``trunk`` then two fully connected layers, sized by a dry run on one (channels, H, W) input."""
    with torch.no_grad():
        flat = trunk(torch.zeros(1, channels, *shape[1:])).shape[1]
    return nn.Sequential(*trunk, nn.Linear(flat, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def cifar_cnn_top(shape: tuple[int, int, int], classes: int, hidden: int = 128, channels: int = 16) -> nn.Sequential:
    """C's part of the paper's CIFAR-10 CNN above the parties' first 3×3 convolution (bias added before it)."""
    trunk = nn.Sequential(
        nn.ReLU(),
        nn.Conv2d(channels, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2, ceil_mode=True),
        nn.Flatten(),
    )
    return _with_head(trunk, shape, channels, hidden, classes)


# the paper's central CNNs: (first-convolution kernel, C's part above it)
PAPER_CNNS = {"mnist": (5, cnn_top), "cifar10": (3, cifar_cnn_top)}


def paper_cnn(shape: tuple[int, int, int]) -> str:
    """Which of the paper's CNNs an image of ``shape`` gets: CIFAR-10's for colour images, else MNIST's."""
    return "cifar10" if shape[0] == 3 else "mnist"


def hidden_width(dims: dict[str, int], classes: int, hidden: int = 0) -> int:
    """The MLP's hidden layer: ``hidden``, or (Σ_p d_p + K)/2 units (the paper's)."""
    return hidden or (sum(dims.values()) + classes) // 2


def party_bottom(
    index: int, dims: dict[str, int], classes: int, hidden: int, seed: int, image=None, device="cpu"
) -> nn.Module:
    """Party ``index``'s bottom layer (of ``dims``' parties, in order): ``x_p W_p`` for the MLP, or its pixels'
    first convolution (``image``: (C, H, W), its pixel positions) for the CNN; seeded ``seed + index``."""
    d = list(dims.values())[index]
    if image is not None:
        kernel = PAPER_CNNS[paper_cnn(image[0])][0]
        module = _seeded(seed + index, lambda: CanvasConv(*image, kernel=kernel))
    else:
        module = _seeded(seed + index, lambda: nn.Linear(d, hidden_width(dims, classes, hidden), bias=False))
    return module.to(device)


class CentralTop:
    """C's part of the split network: the bias on the sum of the parties' bottom outputs and everything above
    it (``dims`` {party: its columns}; ``image_shape`` (C, H, W) for the CNN), with its own SGD. Trained
    through the parties' :class:`Activations` and answered with :class:`ActivationGradient`s."""

    def __init__(
        self,
        dims: dict[str, int],
        classes: int,
        hidden: int,
        lr: float,
        seed: int,
        image_shape: tuple[int, int, int] | None = None,
        device: str = "cpu",
    ):
        self.classes, self.device = classes, torch.device(device)
        if image_shape is not None:
            self.hidden = hidden or 128
            self.network = paper_cnn(image_shape)
            top = PAPER_CNNS[self.network][1]
            self.top = _seeded(seed + 97, lambda: top(image_shape, classes, self.hidden))
            self.bias = nn.Parameter(torch.zeros(16, 1, 1, device=self.device))
        else:
            self.network = "mlp"
            self.hidden = hidden_width(dims, classes, hidden)
            self.top = _seeded(seed + 97, lambda: nn.Sequential(nn.ReLU(), nn.Linear(self.hidden, classes)))
            self.bias = nn.Parameter(torch.zeros(self.hidden, device=self.device))
        self.top.to(self.device)
        self.steps = Steps(torch.optim.SGD([*self.top.parameters(), self.bias], lr=lr))

    def forward(self, activations: list[Activations], grad: bool) -> tuple[Tensor, list[Tensor]]:
        """C's logits on the sum of the parties' activations (in order), and the leaves their errors come from."""
        leaves = [a.values.to(self.device, copy=True).requires_grad_(grad) for a in activations]
        return self.top(sum(leaves) + self.bias), leaves

    def step(self, loss: Tensor) -> None:
        self.steps.step(loss)

    def errors(self, leaves: list[Tensor], parties: list[str], round_: int) -> list[ActivationGradient]:
        """δ of C's first layer w.r.t. each party's activations (eq. 18), one message per party."""
        return [
            ActivationGradient(COLLABORATOR, p, round_, as_float(leaf.grad))
            for p, leaf in zip(parties, leaves, strict=True)
        ]


def steps_for(params, hp: dict) -> Steps:
    """The learner's optimizer, step schedule and clipping (``hp``: its settings) over ``params``: one part's."""
    keys = ("lr", "momentum", "weight_decay", "milestones", "gamma", "optimizer")
    return Steps(*build_optimizer(params, *(hp[k] for k in keys)), clip=hp["grad_clip"])
