"""A party of multi-party dual learning (MPDL): its DP layer h₀, its density estimate, its dual model (A's
f: A → B, B's g: B → A) and its side of Algorithm 2: for the other's generation it answers :class:`OutputGradient`
(plaintext), :class:`DensityDifference` (its Paillier key) and :class:`CrossGradient` (the other's key), together
eq. 17; ``paillier=False`` sends plaintext. What crosses: docs/mpdl.md."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from vcl.datamodules.overlap import PartyData
from vcl.engine.loop import Steps, seeded_init
from vcl.engine.privacy import FeatureDPLayer
from vcl.engine.split_network import CanvasConv, cnn_top
from vcl.errors import VCLInputError
from vcl.messages import Message, ValuesMessage, as_float
from vcl.methods.mpdl.kde import GaussianKDE
from vcl.methods.mpdl.options import seeded_mlp
from vcl.methods.mpdl.paillier import PaillierKeyPair, as_tensors, from_tensors, public_key_from_bytes, scale_rows


# --- the messages of this protocol step (each declares its tensors once; see vcl.messages) ---
@dataclass(frozen=True)
class PublicKey(ValuesMessage):
    """MPDL, a party's Paillier public modulus n as big-endian bytes (uint8)."""

    tensors = {"n": "values"}


@dataclass(frozen=True)
class PerturbedMeans(ValuesMessage):
    """MPDL: a party's column means of its h₀ outputs (eq. 14's φ_j/L). Computed from h₀'s outputs alone, so
    under per-row DP they spend no further budget (post-processing). The other party's dual model generates
    around them (its output shift)."""

    tensors = {"means": "values"}


@dataclass(frozen=True)
class GeneratedData(Message):
    """MPDL: a dual model's output — the sender's estimate of the receiver's (perturbed) features of the
    rows named by the protocol (co-occurring minibatch, B-only rows, A-only rows), N × d_receiver."""

    values: Tensor = field(repr=False)
    rows: str = "overlap"  # "overlap": a minibatch of D_C; "only": the sender's rows the receiver does not hold

    tensors = {"generated": "values"}


@dataclass(frozen=True)
class OutputGradient(ValuesMessage):
    """MPDL Algorithm 2: the plaintext part of the gradient w.r.t. the generated data the receiver sent,
    ∇ℓ_align + λ∇log P(x̂)·(log P(x̂) − log P(x)) (N × d_sender)."""

    tensors = {"gradient": "values"}


@dataclass(frozen=True)
class DensityDifference(Message):
    """MPDL Algorithm 2: the sender's log P(x̂) − log P(x) per row, under its own Paillier key
    (``ciphertexts`` N × bytes, ``exponents`` N) or, with encryption off, in plaintext (``values``)."""

    values: Tensor | None = field(repr=False, default=None)
    ciphertexts: Tensor | None = field(repr=False, default=None)
    exponents: Tensor | None = field(repr=False, default=None)

    tensors = {"values": "values", "ciphertexts": "ciphertexts", "exponents": "exponents"}  # plaintext, or encrypted


@dataclass(frozen=True)
class CrossGradient(Message):
    """MPDL Algorithm 2: λ∇log P(x̂)·[[log P(x) − log P(x̂)]] of the receiver's density difference, still
    under the receiver's key (N·d ciphertexts), or in plaintext with encryption off (N × d)."""

    values: Tensor | None = field(repr=False, default=None)
    ciphertexts: Tensor | None = field(repr=False, default=None)
    exponents: Tensor | None = field(repr=False, default=None)

    tensors = {"values": "values", "ciphertexts": "ciphertexts", "exponents": "exponents"}  # plaintext, or encrypted


def seeded_cnn_generator(shape: tuple[int, int, int], pixels, d_out: int, seed: int) -> torch.nn.Sequential:
    """A CNN dual model for images: the party's pixels on its canvas, the paper's MNIST CNN trunk (conv 5×5
    16, ReLU, pool, conv 5×5 32, ReLU, pool), and a linear output layer onto the other party's pixels."""
    with seeded_init(seed):
        first = CanvasConv(shape, pixels, bias=True)
        trunk = cnn_top(shape, d_out)[:-3]  # ReLU, pool, conv 32, ReLU, pool, flatten
        flat = trunk(first(torch.zeros(1, len(first.pixels)))).shape[1]
        return torch.nn.Sequential(first, trunk, torch.nn.Linear(flat, d_out))


class DualParty:
    """One party (A or B). Its raw rows enter h₀ once; only h₀'s output is used from then on."""

    def __init__(
        self,
        data: PartyData,
        other_dim: int,
        epsilon: float,
        lam: float,
        lr: float,
        hidden: int,
        seed: int,
        noise_seed: int,
        paillier: bool = False,
        key_bits: int = 1024,
        arch: str = "mlp",
        dp_noise: str = "per_row",
        clip: float = 0.0,
        device: str = "cpu",
        kde_rows: int = 0,
    ):
        self.name = data.name
        self.ids = list(data.ids)
        self.clip = clip  # > 0: clip the dual model's gradient norm before each SGD step
        self.image_shape, self.pixels = data.image_shape, data.pixels
        self.device = torch.device(device)  # where the party computes (h₀ and the noise draw stay on the CPU)
        self._data, self._h0_options, self.kde_rows = data, (epsilon, dp_noise), kde_rows
        self._enter(noise_seed)
        self.other_means = torch.zeros(other_dim, device=self.device)
        self.labels = None if data.labels is None else data.labels.to(self.device)  # party B only
        self.dim, self.other_dim, self.lam, self.lr = self.x.shape[1], other_dim, lam, lr
        self.hidden = hidden or (self.dim + other_dim) // 2
        if arch == "cnn":
            if self.image_shape is None:
                raise VCLInputError("mpdl.dual_arch=cnn needs image parties (an image dataset).")
            self.model = seeded_cnn_generator(self.image_shape, self.pixels, other_dim, seed + 1)
        else:
            self.model = seeded_mlp(self.dim, other_dim, self.hidden, seed + 1)
        self.model.to(self.device)
        self.steps = self._steps()
        self.key = PaillierKeyPair(key_bits) if paillier else None
        self.other_public = None
        self._out: Tensor | None = None  # this party's generation of the current step (with its graph)
        self._grad_log_p: Tensor | None = None  # ∇log P at the other's generation (kept for the cross term)
        self.last = {}  # this party's own step figures (alignment loss, density difference), for logs

    def _enter(self, noise_seed: int) -> None:
        """The party's rows through h₀, its noise drawn from ``noise_seed``: the party's own secret, which nothing
        it sends and no other party's config holds (a resumed run enters again with the secret it kept)."""
        data, (epsilon, dp_noise) = self._data, self._h0_options
        self.noise_seed = int(noise_seed)
        gen = torch.Generator().manual_seed(self.noise_seed)
        self.h0 = FeatureDPLayer(data.train, epsilon, gen, dp_noise, data.bounds)
        x = self.h0(data.train)  # each row passes h₀ exactly once: the training rows here, the test rows below
        self.noise_mae = float((x - self.h0.normalize(data.train)).abs().mean())  # log only (Section IV-F)
        self.x = x.to(self.device)  # perturbed training rows, in the party's own order
        self.test = self.h0(data.test).to(self.device)
        self.means = self.x.mean(0)  # released to the other party (PerturbedMeans): computed from h₀'s outputs
        n = self.x.shape[0]
        if 0 < self.kde_rows < n:  # a sample of the party's own rows, drawn with its secret (after h₀'s noise)
            self.kde = GaussianKDE(self.x[torch.randperm(n, generator=gen)[: self.kde_rows].to(self.device)])
        else:
            self.kde = GaussianKDE(self.x)  # N = all the party's rows (N_A or N_B), the paper's
        self._log_p = torch.full((self.x.shape[0],), float("nan"), dtype=torch.float64, device=self.device)

    def local(self, x: Tensor) -> Tensor:
        """A model's input: h₀-space rows of this party's columns, centred on its own column means (local)."""
        return x.to(self.device) - self.means

    def means_message(self, receiver: str, round_: int) -> PerturbedMeans:
        return PerturbedMeans(self.name, receiver, round_, as_float(self.means))

    def receive_means(self, message: PerturbedMeans) -> None:
        self.other_means = message.values.to(self.device, copy=True)

    def _generate(self, x: Tensor) -> Tensor:
        """The other party's h₀-space features: the network models the deviation from its released means."""
        return self.model(self.local(x)) + self.other_means

    # --- keys -------------------------------------------------------------------------------------
    def public_key_message(self, receiver: str, round_: int) -> PublicKey:
        return PublicKey(self.name, receiver, round_, self.key.public_bytes())

    def receive_public_key(self, message: PublicKey) -> None:
        self.other_public = public_key_from_bytes(message.values)

    # --- Algorithm 2 --------------------------------------------------------------------------------
    def generate(self, rows: np.ndarray, receiver: str, round_: int) -> GeneratedData:
        """x̂ = model(h₀(x)) on this party's ``rows``; the graph is kept for :meth:`update`."""
        self._out = self._generate(self.x[rows])
        return GeneratedData(self.name, receiver, round_, as_float(self._out))

    def assess(self, message: GeneratedData, rows: np.ndarray) -> tuple[OutputGradient, DensityDifference]:
        """The other's generation of this party's ``rows``: plaintext gradient and own density difference."""
        x_hat, x = message.values.to(self.device, torch.float64), self.x[rows].to(torch.float64)
        grad_align = 2.0 * (x_hat - x)  # ∇ of the per-row squared error Σ_k (x̂_k − x_k)²
        log_p_hat, self._grad_log_p = self.kde.log_density_and_grad(x_hat)
        diff = log_p_hat - self.own_log_density(rows)  # log P(x̂) − log P(x)
        self.last = {"align": float((x_hat - x).pow(2).sum(1).mean()), "difference": diff.detach()}
        plain = grad_align + self.lam * self._grad_log_p * diff[:, None]
        out = OutputGradient(self.name, message.sender, message.round, as_float(plain))
        if self.key is None:
            return out, DensityDifference(self.name, message.sender, message.round, values=as_float(diff))
        cts, exps = as_tensors(self.key.encrypt(diff.cpu().numpy()), self.key.public)
        return out, DensityDifference(self.name, message.sender, message.round, ciphertexts=cts, exponents=exps)

    def own_log_density(self, rows: np.ndarray) -> Tensor:
        """log P(x) of own rows: fixed over training, so each row's is computed once, when first needed."""
        rows = torch.as_tensor(np.asarray(rows), dtype=torch.long, device=self.device)
        todo = rows[torch.isnan(self._log_p[rows])]
        if len(todo):
            with torch.no_grad():
                self._log_p[todo] = self.kde.log_density(self.x[todo])
        return self._log_p[rows]

    def cross(self, message: DensityDifference) -> CrossGradient:
        """−λ ∇log P(x̂) ⊙ [[d_other]]: the other's half of the duality gradient on the generation it sent."""
        factors = -self.lam * self._grad_log_p
        if message.ciphertexts is None:
            values = factors * message.values.to(factors.device, torch.float64)[:, None]
            return CrossGradient(self.name, message.sender, message.round, values=as_float(values))
        numbers = scale_rows(
            from_tensors(message.ciphertexts, message.exponents, self.other_public), factors.cpu().numpy()
        )
        cts, exps = as_tensors(numbers, self.other_public)
        return CrossGradient(self.name, message.sender, message.round, ciphertexts=cts, exponents=exps)

    def output_gradient(self, plain: OutputGradient, cross: CrossGradient) -> Tensor:
        """The full gradient on this party's last generation (N × d_other), decrypting the cross term."""
        if cross.ciphertexts is None:
            extra = cross.values.to(self.device, torch.float64)
        else:
            numbers = from_tensors(cross.ciphertexts, cross.exponents, self.key.public)
            extra = torch.from_numpy(self.key.decrypt(numbers)).reshape(plain.values.shape).to(self.device)
        return plain.values.to(self.device, torch.float64) + extra

    def update(self, plain: OutputGradient, cross: CrossGradient) -> Tensor:
        """Back-propagate the batch-mean gradient through the dual model and take an SGD step."""
        grad = self.output_gradient(plain, cross)
        self.steps.step(self._out, (grad / grad.shape[0]).to(self._out.dtype))
        self._out = None
        return grad

    # --- inference ------------------------------------------------------------------------------------
    def infer(self, x: Tensor, receiver: str, round_: int) -> GeneratedData:
        """Generate the other party's features of rows only this party holds (already through h₀)."""
        with torch.no_grad():
            return GeneratedData(self.name, receiver, round_, as_float(self._generate(x)))

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "other_means": self.other_means, "noise_seed": self.noise_seed}

    def load_state_dict(self, state: dict) -> None:
        if int(state["noise_seed"]) != self.noise_seed:  # the h₀ outputs of the run being resumed
            self._enter(int(state["noise_seed"]))
        self.model.load_state_dict(state["model"])
        self.other_means = state["other_means"].to(self.device)
        self.steps = self._steps()

    def _steps(self) -> Steps:
        """Plain SGD; ``clip`` > 0 clips the gradient norm, the party's own choice (Section III-B3): nothing
        it sends changes."""
        return Steps(torch.optim.SGD(self.model.parameters(), lr=self.lr), clip=self.clip)
