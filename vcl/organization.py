"""An organization: its private feature view, its own learner and local loss, behind messages.

Nothing outside reads an organization's features: it answers a :class:`PseudoResidual` (or
:class:`Labels`) message with a :class:`FittedValues` message holding its round model's outputs.
Fitting is split into ``begin_fit`` (a :class:`FitJob`: fresh learner + local data) and
``finish_fit`` so an executor on the same host may run several organizations' jobs at once
(:mod:`models.concurrent`); the jobs never leave the host and never enter a message.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from models import LearnerSettings, build_learner
from vcl.messages import FittedValues, Message, PredictionRequest, as_float


@dataclass
class FeatureView:
    """One organization's columns of the aligned rows, per split ("train", "val", "test")."""

    name: str
    columns: list[str]
    splits: dict[str, Tensor]

    @property
    def num_features(self) -> int:
        return len(self.columns)

    @property
    def example_shape(self) -> tuple[int, ...]:
        """Shape of one example: (d,) for rows, (C, H, W) for image patches, (T, F) for sequences."""
        return tuple(next(iter(self.splits.values())).shape[1:])

    def to(self, device) -> FeatureView:
        return FeatureView(self.name, self.columns, {k: v.to(device) for k, v in self.splits.items()})


@dataclass
class FitJob:
    """Work one organization does locally for one message: fit ``learner`` on its own features."""

    organization: Organization
    message: Message
    learner: object
    features: Tensor
    targets: Tensor
    seed: int


def seed_for(*parts: int) -> int:
    """A 31-bit seed derived from (run seed, round, organization, ...), so fits don't share RNG state."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0] & 0x7FFFFFFF)


class Organization:
    def __init__(
        self,
        view: FeatureView,
        learner: str,
        loss: str,
        settings: LearnerSettings,
        device="cpu",
        output_noise: float = 0.0,
    ):
        self.name = view.name
        self.output_noise = output_noise  # σ of Gaussian noise on its outputs (a faulty organization)
        self.learner_name = learner
        self.loss = loss
        self.settings = settings
        self._view = view.to(device)
        self._models: list[tuple[int, int, int, object]] = []  # (round, seed, K, fitted learner)
        self._shared = None  # Deep Model Sharing: the one learner whose extractor every round shares

    @property
    def num_features(self) -> int:
        return self._view.num_features

    @property
    def splits(self) -> list[str]:
        return list(self._view.splits)

    @property
    def example_shape(self) -> tuple[int, ...]:
        return self._view.example_shape

    def _new_learner(self, out_features: int, seed: int, loss: str | None = None, shared: bool = False):
        return build_learner(
            self.learner_name, self.example_shape, out_features, loss or self.loss, seed, self.settings, shared
        )

    def begin_fit(self, message: Message, seed: int, loss: str | None = None) -> FitJob:
        targets = message.values.to(self._view.splits["train"].device)
        if self.settings.dms:
            if self._shared is None:
                self._shared = self._new_learner(targets.shape[1], seed, loss, shared=True)
            learner = self._shared
        else:
            learner = self._new_learner(targets.shape[1], seed, loss)
        return FitJob(self, message, learner, self._view.splits["train"], targets, seed)

    def finish_fit(self, job: FitJob) -> FittedValues:
        """Keep the round model (for the prediction stage) and reply with its outputs on every split."""
        model = job.learner.round_model(job.learner.rounds - 1) if self.settings.dms else job.learner
        self._models.append((job.message.round, job.seed, job.targets.shape[1], model))
        values = {split: self._output(model, x, job.seed, split) for split, x in self._view.splits.items()}
        return FittedValues(self.name, job.message.sender, job.message.round, values)

    def fit(self, message: Message, seed: int, loss: str | None = None) -> FittedValues:
        job = self.begin_fit(message, seed, loss)
        job.learner.fit(job.features, job.targets)
        return self.finish_fit(job)

    def _output(self, learner, x: Tensor, seed: int, split: str, out: Tensor | None = None) -> Tensor:
        """The model's outputs (``out`` if already computed), plus this organization's output noise (seeded
        by model and split)."""
        out = as_float(learner.predict(x) if out is None else out)
        if self.output_noise:
            gen = torch.Generator(device=out.device).manual_seed(seed_for(seed, zlib.crc32(split.encode())))
            out = out + self.output_noise * torch.randn(out.shape, generator=gen, device=out.device)
        return out

    def add_rows(self, split: str, features: Tensor) -> None:
        """New rows of this organization's own columns (aligned by ID with the others'), for prediction."""
        if tuple(features.shape[1:]) != self.example_shape:
            raise ValueError(
                f"{self.name}: rows for split {split!r} need shape (N, {', '.join(map(str, self.example_shape))}), "
                f"got {tuple(features.shape)}."
            )
        device = self._view.splits["train"].device
        self._view.splits[split] = features.to(device=device, dtype=torch.float32)

    def predict(self, message: PredictionRequest) -> FittedValues:
        """The prediction stage: every round model's outputs on the requested rows ({round: N × K})."""
        x = self._view.splits[message.split]
        shared = self._shared.predict_rounds(x) if self.settings.dms and self._shared is not None else None
        values = {
            str(r): self._output(learner, x, s, message.split, None if shared is None else shared[learner.index])
            for r, s, _, learner in self._models
        }
        return FittedValues(self.name, message.sender, message.round, values)

    # --- resumable state --------------------------------------------------------------------
    def state_dict(self) -> dict:
        if self.settings.dms:
            shared = None if self._shared is None else self._shared.shared_state()
            return {"shared": shared, "models": [(r, s, k, m.index) for r, s, k, m in self._models]}
        return {"models": [(r, s, k, lr.state_dict()) for r, s, k, lr in self._models]}

    def load_state_dict(self, state: dict) -> None:
        self._models = []
        if self.settings.dms:
            self._shared = None
            if state["shared"] is not None:
                r0, s0, k0, _ = state["models"][0]
                self._shared = self._new_learner(k0, s0, shared=True).to(self._view.splits["train"].device)
                self._shared.load_shared_state(state["shared"])
            self._models = [(r, s, k, self._shared.round_model(i)) for r, s, k, i in state["models"]]
            return
        for r, s, k, sd in state["models"]:
            learner = self._new_learner(k, s)
            learner.load_state_dict(sd)
            self._models.append((r, s, k, learner))

    @property
    def rounds_fitted(self) -> int:
        return len(self._models)

    def stored_parameters(self) -> int:
        """Parameters of the torch models this organization keeps for prediction (a shared extractor once)."""
        modules = {id(m): m for m in (getattr(x, "learner", x) for _, _, _, x in self._models)}
        return sum(p.numel() for m in modules.values() if hasattr(m, "parameters") for p in m.parameters())


def run_jobs(jobs: list[FitJob], concurrent: bool) -> None:
    """Fit every job; jobs with the same targets and learner architecture are fitted in one pass if ``concurrent``."""
    from models import concurrency_key, fit_concurrently

    groups: dict[object, list[FitJob]] = {}
    for i, job in enumerate(jobs):
        key = concurrency_key(job.learner) if concurrent else None
        groups.setdefault((key, id(job.targets)) if key is not None else i, []).append(job)
    for group in groups.values():
        if len(group) > 1:
            fit_concurrently([j.learner for j in group], [j.features for j in group], group[0].targets)
        else:
            group[0].learner.fit(group[0].features, group[0].targets)


def stack_replies(replies: list[FittedValues], device=None) -> dict[str, Tensor]:
    """{split: (M, N, K)} on ``device`` (Alice's) from the organizations' replies, in the order given."""
    return {split: torch.stack([r.values[split].to(device) for r in replies]) for split in replies[0].values}
