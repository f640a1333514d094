"""Privacy mechanisms for what a protocol sends out (GAL Section 4.5, and the GAL authors' code).

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


def laplace(shape, scale, generator: torch.Generator, device=None, dtype=torch.float32) -> Tensor:
    """Laplace(0, ``scale``) draws by inverse transform of one seeded uniform per entry."""
    u = torch.rand(shape, generator=generator, device=device, dtype=dtype) - 0.5
    return -scale * torch.sign(u) * torch.log1p(-2.0 * u.abs())


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
        noise = laplace(values.shape, (b - a) / self.alpha, generator, values.device, values.dtype)
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


DP_NOISE = ("shared", "per_row")


class FeatureDPLayer:
    """MPDL's feature-oriented differentially private affine layer h₀ (Section III-C1, eqs 12–16).

    Inputs are min–max normalized to [0, 1] with the party's own training rows (clipped), then perturbed
    by ``(1/L)·Lap(Δ/ε)`` per input feature with the sensitivity ``Δ = 2·|h₀|·L`` (eq. 13). Two readings of
    "identical noise distribution ... to all input features" (``noise``):

    - ``shared`` (default): one draw per feature, the same for all L rows — the only reading under which
      eq. 14's ``Σ_i (x_ij + (1/L)·Lap(Δ/ε)) = Σ_i x_ij + Lap(Δ/ε)`` holds;
    - ``per_row``: every entry (row and feature, training and test rows alike) gets its own draw of the same
      distribution ``(1/L)·Lap(Δ/ε)`` — noise a model cannot learn around, so accuracy falls with ε.

    The affine map is the identity (|h₀| = d neurons, W = I, b = 0), so h₀'s output lives in the data's own
    space, which the paper's inference MAE between raw and inferred data presupposes (Section IV-F).
    ``epsilon = 0`` means no privacy (ε = ∞). Everything downstream of the party — its dual model, what it
    sends, the split network's bottom layer — sees only h₀'s output.
    """

    def __init__(self, train: Tensor, epsilon: float, generator: torch.Generator, noise: str = "shared"):
        if epsilon < 0:
            raise VCLInputError(f"mpdl_epsilon={epsilon}; use a privacy budget > 0, or 0 for no privacy (ε = ∞).")
        if noise not in DP_NOISE:
            raise VCLInputError(f"mpdl_dp_noise={noise!r}; use one of {', '.join(DP_NOISE)}.")
        self.low = train.min(0).values
        span = train.max(0).values - self.low
        self.span = torch.where(span > 0, span, torch.ones_like(span))
        self.rows, self.width = train.shape[0], train.shape[1]  # L and |h₀|
        self.epsilon, self.noise, self.generator = epsilon, noise, generator
        self.sensitivity = 2.0 * self.width * self.rows  # Δ = 2·|h₀|·L
        self.scale = self.sensitivity / epsilon if epsilon > 0 else 0.0  # Δ/ε
        draw = laplace((self.width,), self.scale, generator) if epsilon > 0 else torch.zeros(self.width)
        self.offset = draw / self.rows  # shared: (1/L)·Lap(Δ/ε), identical for every row
        if noise == "per_row":
            self.offset = torch.zeros(self.width)

    @property
    def entry_scale(self) -> float:
        """The Laplace scale of the noise on one entry: Δ/(ε·L) = 2·|h₀|/ε."""
        return self.scale / self.rows

    def normalize(self, x: Tensor) -> Tensor:
        return ((x - self.low) / self.span).clamp(0.0, 1.0)

    def __call__(self, x: Tensor) -> Tensor:
        if self.noise == "per_row" and self.epsilon > 0:  # a fresh draw per entry, from the layer's own generator
            return self.normalize(x) + laplace(x.shape, self.entry_scale, self.generator)
        return self.normalize(x) + self.offset
