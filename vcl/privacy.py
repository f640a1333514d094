"""Privacy mechanisms for what a protocol sends out (GAL Section 4.5; REFERENCE.md).

Both clip to the [a, b] = 2.5%–97.5% quantiles of the tensor being sent:

- :class:`LaplaceMechanism` (differential privacy): ``clip(y, a, b) + Laplace((b − a)/α)``;
- :class:`IntervalPrivacy` (one interval): draw ``t ~ U(a, b)`` and send ``2t − b`` if ``y < t`` else
  ``2t − a`` — unbiased for ``y ∈ [a, b]``.

A mechanism is called with a seeded ``torch.Generator`` so runs are reproducible and resumable. The
sender keeps the clean values for its own use (Alice's weights and line search).
"""

from __future__ import annotations

import torch
from torch import Tensor

from vcl.errors import VCLInputError

MECHANISMS = ("none", "dp", "ip")


def _bounds(values: Tensor, quantiles: tuple[float, float]) -> tuple[Tensor, Tensor]:
    q = torch.tensor(quantiles, dtype=values.dtype, device=values.device)
    a, b = torch.quantile(values.flatten(), q)
    return a, b


class LaplaceMechanism:
    def __init__(self, alpha: float = 1.0, quantiles: tuple[float, float] = (0.025, 0.975)):
        if alpha <= 0:
            raise VCLInputError(f"privacy_alpha={alpha}; use a positive number (smaller is more private).")
        self.alpha, self.quantiles = alpha, quantiles

    def scale(self, values: Tensor) -> Tensor:
        a, b = _bounds(values, self.quantiles)
        return (b - a) / self.alpha

    def __call__(self, values: Tensor, generator: torch.Generator) -> Tensor:
        a, b = _bounds(values, self.quantiles)
        u = torch.rand(values.shape, generator=generator, device=values.device, dtype=values.dtype) - 0.5
        noise = -((b - a) / self.alpha) * torch.sign(u) * torch.log1p(-2.0 * u.abs())
        return values.clamp(a, b) + noise


class IntervalPrivacy:
    def __init__(self, quantiles: tuple[float, float] = (0.025, 0.975)):
        self.quantiles = quantiles

    @staticmethod
    def transform(values: Tensor, t: Tensor, a: Tensor, b: Tensor) -> Tensor:
        return torch.where(values < t, 2 * t - b, 2 * t - a)

    def __call__(self, values: Tensor, generator: torch.Generator) -> Tensor:
        a, b = _bounds(values, self.quantiles)
        t = a + (b - a) * torch.rand(values.shape, generator=generator, device=values.device, dtype=values.dtype)
        return self.transform(values, t, a, b)


def make_mechanism(name: str, alpha: float = 1.0):
    """``none`` → None, ``dp`` → Laplace, ``ip`` → interval privacy."""
    if name not in MECHANISMS:
        raise VCLInputError(f"privacy={name!r} is unknown; use one of {', '.join(MECHANISMS)}.")
    return None if name == "none" else LaplaceMechanism(alpha) if name == "dp" else IntervalPrivacy()
