"""The networks a local learner can use: MLP (Linear when it has no hidden layer), GAL's CNN, an LSTM.

Every network is ``nn.Sequential(extractor, head)``: ``head`` is the last Linear layer, ``extractor``
everything before it. Deep Model Sharing (:mod:`vcl.models.dms`) and Interm fusion reuse the extractor
and replace the head.
"""

from __future__ import annotations

import math

from torch import Tensor, nn

ARCHITECTURES = ("mlp", "cnn", "lstm")


def build_mlp(in_features: int, out_features: int, hidden: tuple[int, ...] = ()) -> nn.Sequential:
    """``Linear`` when ``hidden`` is empty, otherwise Linear-ReLU blocks then a Linear head."""
    layers: list[nn.Module] = []
    width = in_features
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


def cnn_extractor(
    in_channels: int, widths: tuple[int, ...] = (64, 128, 256, 512), last_pool: bool = True
) -> nn.Sequential:
    """GAL Table 8: [conv3×3 → BatchNorm → ReLU → max-pool 2] per width, then global average pool.

    ``last_pool=False`` drops the max-pool after the last block (the GAL authors' code pools after all
    but the last). Pools use ``ceil_mode``: an odd side rounds up and a side of 1 stays 1, so patches
    smaller than 2^(number of pools) — digits' 4×4 quadrants, a 1-pixel patch — still pass, pooling
    only while there is something to halve; on even sizes (MNIST, CIFAR-10) this is the paper's halving.
    """
    layers: list[nn.Module] = []
    ch = in_channels
    for i, w in enumerate(widths):
        layers += [nn.Conv2d(ch, w, 3, 1, 1), nn.BatchNorm2d(w), nn.ReLU()]
        if last_pool or i < len(widths) - 1:
            layers.append(nn.MaxPool2d(2, ceil_mode=True))
        ch = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return nn.Sequential(*layers)


class LastStep(nn.Module):
    """LSTM over (N, T, F) sequences; returns the last step's hidden state after dropout."""

    def __init__(self, in_features: int, hidden: int = 128, dropout: float = 0.3):
        super().__init__()
        self.lstm = nn.LSTM(in_features, hidden, num_layers=1, batch_first=True)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.lstm(x)
        return self.dropout(out[:, -1])


def build_network(
    arch: str,
    in_shape: tuple[int, ...],
    out_features: int,
    hidden: tuple[int, ...] = (),
    widths: tuple[int, ...] = (64, 128, 256, 512),
    lstm_hidden: int = 128,
    dropout: float = 0.3,
    last_pool: bool = True,
) -> nn.Sequential:
    """``Sequential(extractor, head)`` for an input of shape ``in_shape`` (one row, no batch dimension)."""
    if arch == "mlp":
        flat = math.prod(in_shape)
        width = hidden[-1] if hidden else flat
        trunk: list[nn.Module] = [nn.Flatten()] if len(in_shape) > 1 else []
        for i, h in enumerate(hidden):  # the Linear-ReLU blocks
            trunk += [nn.Linear(hidden[i - 1] if i else flat, h), nn.ReLU()]
        extractor = nn.Sequential(*trunk)
    elif arch == "cnn":
        if len(in_shape) != 3:
            raise ValueError(f"the cnn learner needs images (C, H, W); this organization's rows have shape {in_shape}.")
        extractor, width = cnn_extractor(in_shape[0], tuple(widths), last_pool), widths[-1]
    elif arch == "lstm":
        if len(in_shape) != 2:
            raise ValueError(
                f"the lstm learner needs sequences (T, F); this organization's rows have shape {in_shape}."
            )
        extractor, width = nn.Sequential(LastStep(in_shape[1], lstm_hidden, dropout)), lstm_hidden
    else:
        raise ValueError(f"arch={arch!r}; use one of {', '.join(ARCHITECTURES)}.")
    return nn.Sequential(extractor, nn.Linear(width, out_features))


def single_linear(net: nn.Module) -> str | None:
    """The name of the network's one layer when it is a Linear with bias and nothing else (an empty extractor and
    the head: the linear learner), else None."""
    leaves = [(name, m) for name, m in net.named_modules() if not isinstance(m, nn.Sequential)]
    if len(leaves) == 1 and isinstance(leaves[0][1], nn.Linear) and leaves[0][1].bias is not None:
        return leaves[0][0]
    return None


def extractor_width(net: nn.Sequential) -> int:
    return net[1].in_features
