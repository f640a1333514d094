"""Privacy mechanisms for what a protocol sends out (GAL Section 4.5, and the GAL authors' code).

:class:`LabelPrivacy` (``gal.privacy: dp``) privatizes Alice's labels once. The residual mechanisms clip to the
2.5%–97.5% quantiles [a, b] of what is sent: :class:`LaplaceMechanism` sends ``clip(y, a, b) + Laplace((b − a)/α)``,
:class:`IntervalPrivacy` draws ``t ~ U(a, b)`` and sends ``2t − b`` if ``y < t`` else ``2t − a``; neither is DP
(docs/privacy.md, "Budgets"). Noise comes from the sender's secret seed; ``attack`` is the receiver that redraws it."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from vcl.errors import VCLInputError

MECHANISMS = ("none", "dp", "dp_residuals", "residual_laplace", "ip")


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
            raise VCLInputError(f"gal.privacy_alpha={alpha}; use a positive number (smaller is more private).")
        self.alpha, self.quantiles = alpha, quantiles

    def scale(self, values: Tensor) -> Tensor:
        a, b = _bounds(values, self.quantiles)
        return (b - a) / self.alpha

    def __call__(self, values: Tensor, generator: torch.Generator) -> Tensor:
        a, b = _bounds(values, self.quantiles)
        noise = laplace(values.shape, (b - a) / self.alpha, generator, values.device, values.dtype)
        return values.clamp(a, b) + noise

    def attack(self, received: Tensor, clean: Tensor, generator: torch.Generator) -> Tensor:
        """The receiver that redraws the noise with ``generator`` (and knows the clipping bounds): received − noise."""
        a, b = _bounds(clean, self.quantiles)
        return received - laplace(received.shape, (b - a) / self.alpha, generator, received.device, received.dtype)


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

    def attack(self, received: Tensor, clean: Tensor, generator: torch.Generator) -> Tensor:
        """The receiver that redraws each threshold t with ``generator`` (and knows the bounds): the value sent says
        on which side of t the clean one lies (2t − b below it, 2t − a above); its estimate is that side's middle."""
        a, b = _bounds(clean, self.quantiles)
        t = a + (b - a) * torch.rand(received.shape, generator=generator, device=received.device, dtype=received.dtype)
        return torch.where(received < t, (a + t) / 2, (t + b) / 2)


class BoundedResidualLaplace:
    """``gal.privacy: dp_residuals``: each round's residual of a bounded loss (classification's cross-entropy:
    onehot(y) − softmax(F); regression's l1: sign(y − F)), every entry in the public [−1, 1], plus Laplace of scale
    ``sensitivity · noise_multiplier``. One person's label moves only that person's row, by at most 2 in L1 (two
    entries of a one-hot, or one sign flipped), provided everything else the residual depends on (F) is computed from
    what was released: the protocol keeps to that (:class:`vcl.methods.gal.coordinator.GradientAssistedLearning`),
    and the rounds compose (:func:`vcl.audit.budget.laplace_multiplier` calibrates the multiplier to the run's ε)."""

    sensitivity = 2.0

    def __init__(self, noise_multiplier: float):
        self.noise_multiplier = float(noise_multiplier)

    @property
    def scale(self) -> float:
        return self.sensitivity * self.noise_multiplier

    def __call__(self, values: Tensor, generator: torch.Generator) -> Tensor:
        noise = laplace(values.shape, self.scale, generator, values.device, values.dtype)
        return values.clamp(-1.0, 1.0) + noise

    def attack(self, received: Tensor, clean: Tensor, generator: torch.Generator) -> Tensor:
        """The receiver that redraws the noise with ``generator`` (the scale is public): received − noise."""
        return received - laplace(received.shape, self.scale, generator, received.device, received.dtype)


def make_mechanism(name: str, alpha: float = 1.0, noise_multiplier: float = 0.0):
    """The mechanism on Alice's broadcast: ``dp_residuals`` → bounded residuals with Laplace (``noise_multiplier``),
    ``residual_laplace`` → Laplace, ``ip`` → interval privacy; None for ``none`` and for ``dp``, whose noise is on
    the labels (:class:`LabelPrivacy`), not on what is sent."""
    if name not in MECHANISMS:
        raise VCLInputError(f"gal.privacy={name!r} is unknown; use one of {', '.join(MECHANISMS)}.")
    if name == "dp_residuals":
        return BoundedResidualLaplace(noise_multiplier)
    if name == "residual_laplace":
        return LaplaceMechanism(alpha)
    return IntervalPrivacy() if name == "ip" else None


class LabelPrivacy:
    """ε-label differential privacy, spent once (``gal.privacy: dp``): randomized response over K classes, or the
    target clipped to the public ``bounds`` plus Laplace((high − low)/ε) (docs/privacy.md, "Budgets"). Every row's draws
    are made whatever its label, so data sets differing in one label differ in that row alone; everything trained on the
    output is post-processing. Budget: :func:`vcl.audit.budget.label_budget`."""

    def __init__(self, epsilon: float, classes: int | None, bounds: tuple[float, float] | None = None):
        if not epsilon > 0 or not math.isfinite(epsilon):
            raise VCLInputError(f"gal.privacy_epsilon={epsilon}; use a positive, finite epsilon (smaller: private).")
        if classes is None and (bounds is None or len(bounds) != 2 or not bounds[0] < bounds[1]):
            raise VCLInputError(
                f"gal.privacy=dp on a regression task needs the public range its targets are clipped to; give "
                f"gal.label_bounds [low, high] with low < high (now {list(bounds or [])})."
            )
        self.epsilon, self.classes, self.bounds = float(epsilon), classes, bounds

    @property
    def keep(self) -> float:
        """Classification: the probability a label is sent as it is."""
        e = math.exp(self.epsilon)
        return e / (e + self.classes - 1)

    def __call__(self, labels: Tensor, generator: torch.Generator) -> Tensor:
        """The privatized labels (a CPU ``generator``: the same draws on any device)."""
        y = labels.cpu()
        if self.classes is not None:
            u = torch.rand(y.shape, generator=generator)
            other = torch.randint(0, self.classes - 1, y.shape, generator=generator)
            other = other + (other >= y).to(other.dtype)  # one of the K − 1 classes that are not the label
            return torch.where(u < self.keep, y, other.to(y.dtype)).to(labels.device)
        low, high = self.bounds
        noise = laplace(y.shape, (high - low) / self.epsilon, generator, dtype=torch.float64)
        return (y.double().clamp(low, high) + noise).to(labels.dtype).to(labels.device)


DP_NOISE = ("per_row", "offset_no_dp")
REMOVED_DP_NOISE = {
    "shared": "mpdl.dp_noise=shared is no longer accepted: one offset per feature is not differential privacy "
    "(each party's mean-centring cancels it and the receiver can subtract it); use per_row (ε-DP per row, "
    "the default), or offset_no_dp to run that offset knowingly, without any guarantee."
}


def check_dp_noise(noise: str) -> None:
    if noise in REMOVED_DP_NOISE:
        raise VCLInputError(REMOVED_DP_NOISE[noise])
    if noise not in DP_NOISE:
        raise VCLInputError(f"mpdl.dp_noise={noise!r}; use one of {', '.join(DP_NOISE)}.")


class FeatureDPLayer:
    """MPDL's DP layer h₀ (Section III-C1): normalize each row to [0, 1]^d, then perturb it.

    Min–max normalization with per-feature ``bounds`` (``None``: the party's own training minimum and maximum, released
    in the clear; images pass the public (0, 1)), values outside clipped. ``noise="per_row"`` (default): every entry
    gets its own Lap(d/ε), clipped to [0, 1], so each row's release is ε-DP; each row must pass through it only once.
    ``noise="offset_no_dp"``: the paper's eq. 14 read literally, one shift per feature, **not differential privacy**.
    The guarantee and what is released: docs/mpdl.md ("h₀ and what it guarantees"). W = I, b = 0; ``epsilon = 0`` adds
    no noise."""

    def __init__(
        self,
        train: Tensor,
        epsilon: float,
        generator: torch.Generator,
        noise: str = "per_row",
        bounds: tuple[float, float] | None = None,
    ):
        if epsilon < 0:
            raise VCLInputError(f"mpdl.epsilon={epsilon}; use a privacy budget > 0, or 0 for no privacy (ε = ∞).")
        check_dp_noise(noise)
        self.public_bounds = bounds is not None
        if bounds is None:
            self.low, high = train.min(0).values, train.max(0).values
        else:
            self.low = torch.full((train.shape[1],), float(bounds[0]), dtype=train.dtype)
            high = torch.full((train.shape[1],), float(bounds[1]), dtype=train.dtype)
        span = high - self.low
        self.span = torch.where(span > 0, span, torch.ones_like(span))
        self.rows, self.width = train.shape[0], train.shape[1]  # L and d = |h₀|
        self.epsilon, self.noise, self.generator = epsilon, noise, generator
        self.offset = torch.zeros(self.width)
        if noise == "per_row":
            self.sensitivity = float(self.width)  # L1 change of one normalized row in [0, 1]^d
            self.scale = self.sensitivity / epsilon if epsilon > 0 else 0.0  # Laplace scale of every entry
        else:
            self.sensitivity = 2.0 * self.width * self.rows  # the paper's Δ = 2·|h₀|·L (eq. 13)
            self.scale = self.sensitivity / epsilon if epsilon > 0 else 0.0  # Δ/ε, on each feature's sum
            if epsilon > 0:
                self.offset = laplace((self.width,), self.scale, generator) / self.rows  # (1/L)·Lap(Δ/ε)

    @property
    def private(self) -> bool:
        """Whether the output carries an ε-DP guarantee (per_row with ε > 0)."""
        return self.noise == "per_row" and self.epsilon > 0

    @property
    def entry_scale(self) -> float:
        """The Laplace scale of the noise on one entry: d/ε (per_row); offset_no_dp: Δ/(ε·L) = 2d/ε."""
        return self.scale if self.noise == "per_row" else self.scale / self.rows

    @property
    def feature_epsilon(self) -> float:
        """The share of ε each feature of a row spends (per_row): ε/d."""
        return self.epsilon / self.width

    def normalize(self, x: Tensor) -> Tensor:
        return ((x - self.low) / self.span).clamp(0.0, 1.0)

    def redraw(self, released: Tensor, generator: torch.Generator) -> Tensor:
        """A receiver's estimate of the normalized training rows behind ``released`` (the layer's first output)
        if ``generator`` repeats the holder's draws: the noise subtracted where the output was not clipped; where
        it was, the middle of the interval of [0, 1] that the clipping and the known noise leave."""
        if self.epsilon == 0:
            return released
        if self.noise != "per_row":  # the one draw per feature the layer made first (its offset)
            return released - laplace((self.width,), self.scale, generator) / self.rows
        noise = laplace(released.shape, self.scale, generator, dtype=released.dtype)
        top = (1.0 - noise).clamp(0.0, 1.0)  # released = 1: x ≥ 1 − noise
        bottom = (-noise).clamp(0.0, 1.0)  # released = 0: x ≤ −noise
        inside = (released - noise).clamp(0.0, 1.0)
        return torch.where(released >= 1.0, (top + 1.0) / 2, torch.where(released <= 0.0, bottom / 2, inside))

    def __call__(self, x: Tensor) -> Tensor:
        """h₀ of rows ``x`` (raw features). Call it once per row: every call draws fresh noise."""
        if self.noise == "per_row":
            if self.epsilon == 0:
                return self.normalize(x)
            noisy = self.normalize(x) + laplace(x.shape, self.scale, self.generator, dtype=x.dtype)
            return noisy.clamp(0.0, 1.0)  # post-processing with the public range
        return self.normalize(x) + self.offset
