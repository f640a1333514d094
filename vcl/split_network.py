"""The central model at the collaborator C as a split network (MPDL Section III-B2 / III-C3, Figure 3).

Each party holds the bottom layer on its own columns, ``z_p = x_p W_p`` (x_p already through its DP
layer h₀, or a generation of it); C holds everything above: ``softmax(V·ReLU(Σ_p z_p + b) + c)``. In
training, the parties send C their activations z_p (:class:`Activations`) and B sends the labels once;
C sends each party the errors δ of its first layer (:class:`ActivationGradient`, eq. 18), from which the
party updates W_p. One hidden layer of (d_in + K)/2 units, SGD at the paper's rate.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from vcl.messages import ActivationGradient, Activations, Channel, Labels, as_classes, as_float

COLLABORATOR = "collaborator"


def _seeded(seed: int, make):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()


class SplitNetwork:
    def __init__(self, dims: dict[str, int], classes: int, hidden: int, lr: float, seed: int):
        self.classes = classes
        self.hidden = hidden or (sum(dims.values()) + classes) // 2
        self.bottoms = {
            p: _seeded(seed + i, lambda d=d: nn.Linear(d, self.hidden, bias=False))
            for i, (p, d) in enumerate(dims.items())
        }
        self.top = _seeded(seed + 97, lambda: nn.Sequential(nn.ReLU(), nn.Linear(self.hidden, classes)))
        self.bias = nn.Parameter(torch.zeros(self.hidden))
        self.optimizers = {p: torch.optim.SGD(m.parameters(), lr=lr) for p, m in self.bottoms.items()}
        self.optimizers[COLLABORATOR] = torch.optim.SGD([*self.top.parameters(), self.bias], lr=lr)

    def _forward(self, inputs: dict[str, Tensor], rows, channel: Channel, round_: int):
        """Each party's activations on ``rows`` reach C; returns (C's logits, party outputs, C's leaves)."""
        outs, leaves = {}, {}
        for p, x in inputs.items():
            outs[p] = self.bottoms[p](x[rows])
            msg = channel.send(Activations(p, COLLABORATOR, round_, as_float(outs[p])))
            leaves[p] = msg.values.clone().requires_grad_(True)
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
        y = channel.send(Labels(label_holder, COLLABORATOR, round_, as_classes(labels, self.classes))).values.long()
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
                    out.backward(delta)
                    self.optimizers[p].step()
                loss_sum += float(loss.detach()) * len(rows)
        return loss_sum / max(n, 1)

    def predict(self, inputs: dict[str, Tensor], channel: Channel, round_: int) -> Tensor:
        """C's class scores (logits) on aligned rows."""
        n = next(iter(inputs.values())).shape[0]
        with torch.no_grad():
            return self._forward(inputs, torch.arange(n), channel, round_)[0]
