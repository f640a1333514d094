"""The central model at the collaborator C as a split network (MPDL Section III-B2 / III-C3, Figure 3).

Each party holds the bottom layer on its own columns, ``z_p = x_p W_p`` (x_p already through its DP
layer h₀, or a generation of it); C holds everything above: ``softmax(V·ReLU(Σ_p z_p + b) + c)``. In
training, the parties send C their activations z_p (:class:`Activations`) and B sends the labels once;
C sends each party the errors δ of its first layer (:class:`ActivationGradient`, eq. 18), from which the
party updates W_p. One hidden layer of (d_in + K)/2 units, SGD at the paper's rate.

``arch="cnn"`` (images): the paper's CNN for the dataset (Section IV-B), split at its first convolution —
for grey images (MNIST) two 5×5 convolutions of 16 and 32 channels, for colour images (CIFAR-10) three 3×3
convolutions of 16, 32 and 32 channels followed by a 2×2 max-pool; both then two fully connected layers and a
softmax. Each party's bottom layer places its own pixels on the image canvas (zeros where it has none) and
convolves them (16 channels, no bias, :class:`CanvasConv`); since a convolution is linear, the sum of the
parties' maps is one convolution of the parties' stacked canvases, exactly as Σ_p x_p W_p is for the MLP. C
adds the bias and holds the rest — MNIST: ReLU, 2×2 max-pool, conv 5×5 (32), ReLU, 2×2 max-pool, FC (128),
ReLU, FC (K); CIFAR-10: ReLU, conv 3×3 (32), ReLU, conv 3×3 (32), ReLU, 2×2 max-pool, FC (128), ReLU, FC (K).
The MNIST network's pooling and both FC widths are not in the paper (ours). Only the bottom maps
(N × 16 × H × W) and their gradients cross, as for the MLP.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor, nn

from vcl.messages import ActivationGradient, Activations, Channel, Labels, as_classes, as_float

COLLABORATOR = "collaborator"


def _seeded(seed: int, make):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
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


class SplitNetwork:
    """``dims`` {party: its number of columns}; for ``arch="cnn"``, ``images`` {party: (C, H, W), its pixel
    positions} (every party of a CNN must hold image pixels)."""

    def __init__(
        self,
        dims: dict[str, int],
        classes: int,
        hidden: int,
        lr: float,
        seed: int,
        arch: str = "mlp",
        images: dict[str, tuple] | None = None,
        device: str = "cpu",
    ):
        self.classes, self.device = classes, torch.device(device)
        if arch == "cnn":
            self.hidden = hidden or 128
            shape = next(iter(images.values()))[0]
            self.network = paper_cnn(shape)
            kernel, top = PAPER_CNNS[self.network]
            self.bottoms = {
                p: _seeded(seed + i, lambda p=p: CanvasConv(*images[p], kernel=kernel)) for i, p in enumerate(dims)
            }
            self.top = _seeded(seed + 97, lambda: top(shape, classes, self.hidden))
            self.bias = nn.Parameter(torch.zeros(16, 1, 1, device=self.device))
        else:
            self.network = "mlp"
            self.hidden = hidden or (sum(dims.values()) + classes) // 2
            self.bottoms = {
                p: _seeded(seed + i, lambda d=d: nn.Linear(d, self.hidden, bias=False))
                for i, (p, d) in enumerate(dims.items())
            }
            self.top = _seeded(seed + 97, lambda: nn.Sequential(nn.ReLU(), nn.Linear(self.hidden, classes)))
            self.bias = nn.Parameter(torch.zeros(self.hidden, device=self.device))
        for module in (*self.bottoms.values(), self.top):
            module.to(self.device)
        self.optimizers = {p: torch.optim.SGD(m.parameters(), lr=lr) for p, m in self.bottoms.items()}
        self.optimizers[COLLABORATOR] = torch.optim.SGD([*self.top.parameters(), self.bias], lr=lr)

    def _forward(self, inputs: dict[str, Tensor], rows, channel: Channel, round_: int):
        """Each party's activations on ``rows`` reach C; returns (C's logits, party outputs, C's leaves)."""
        outs, leaves = {}, {}
        for p, x in inputs.items():
            outs[p] = self.bottoms[p](x[rows].to(self.device))
            msg = channel.send(Activations(p, COLLABORATOR, round_, as_float(outs[p])))
            leaves[p] = msg.values.to(self.device, copy=True).requires_grad_(True)
        logits = self.top(sum(leaves.values()) + self.bias)
        return logits, outs, leaves

    def fit(
        self,
        inputs: dict[str, Tensor],
        labels: Tensor,
        label_holder: str,
        epochs: int,
        batch_size: int,
        generator: torch.Generator,
        channel: Channel,
        round_: int,
    ) -> float:
        """Train on aligned rows (every party's ``inputs`` row i is the same individual); mean last-epoch loss."""
        message = channel.send(Labels(label_holder, COLLABORATOR, round_, as_classes(labels, self.classes)))
        y = message.values.to(self.device).long()
        n, loss_sum = y.shape[0], 0.0
        for _ in range(epochs):
            loss_sum = 0.0
            for rows in torch.randperm(n, generator=generator).split(batch_size):
                logits, outs, leaves = self._forward(inputs, rows, channel, round_)
                loss = nn.functional.cross_entropy(logits, y[rows])
                for opt in self.optimizers.values():
                    opt.zero_grad()
                loss.backward()
                self.optimizers[COLLABORATOR].step()
                for p, out in outs.items():
                    delta = channel.send(ActivationGradient(COLLABORATOR, p, round_, as_float(leaves[p].grad))).values
                    out.backward(delta.to(out.device))
                    self.optimizers[p].step()
                loss_sum += float(loss.detach()) * len(rows)
        return loss_sum / max(n, 1)

    def predict(self, inputs: dict[str, Tensor], channel: Channel, round_: int) -> Tensor:
        """C's class scores (logits) on aligned rows, on the CPU (where runs are scored)."""
        n = next(iter(inputs.values())).shape[0]
        with torch.no_grad():
            return self._forward(inputs, torch.arange(n), channel, round_)[0].cpu()
