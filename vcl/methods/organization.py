"""An organization: its private feature view, its own learner and local loss, behind messages
(:meth:`Organization.handle`; docs/design.md, "The organization boundary"). Several in one process answer a round's
requests through :meth:`Organization.handle_batch`, in one pass, each as its ``handle`` alone would."""

from __future__ import annotations

import contextlib
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from vcl.datamodules.tabular import kept_preparations
from vcl.engine.concurrent import fit_jobs
from vcl.engine.loop import seed_for
from vcl.engine.losses import local_loss
from vcl.errors import VCLInputError
from vcl.family import Party
from vcl.messages import Labels, Message, as_float
from vcl.methods.messages import FittedValues, ModelsReport, ModelsRequest, PredictionRequest, PseudoResidual
from vcl.models import LearnerSettings, build_learner, learner_prototype
from vcl.storage.logs import after_last_event_file

FIT_REQUESTS = (PseudoResidual, Labels)  # what an organization fits
MAX_OUTPUTS = 100_000  # outputs a row a fit may ask for (classes, or a regression's targets)

if TYPE_CHECKING:
    from vcl.datamodules.tabular import FeatureView


@dataclass
class FitJob:
    """Work one organization does locally for one message: fit ``learner`` on its own training rows, then
    predict its own rows of every split (``inputs``). An executor that fits several jobs at once may also fill in
    ``outputs`` ({split: N × K}) and ``train_loss`` (the local loss on the training rows); else the organization
    computes them itself. A torch learner is not made until needed (:meth:`built`: ``prototype.renewed(seed)``):
    Linear learners fitted together keep only their parameters (:func:`vcl.models.fit_linear_rounds`), which the
    executor puts in ``learner``."""

    message: Message
    learner: object | None
    inputs: dict[str, Tensor]
    targets: Tensor
    seed: int
    prototype: object | None = None
    outputs: dict[str, Tensor] | None = None
    train_loss: float | None = None
    fit_options: dict | None = None  # engine trainer: the Trainer's log folder and callbacks for this fit
    started: float = field(default_factory=time.perf_counter)  # when the message was taken up (its reply's seconds)

    @property
    def features(self) -> Tensor:
        return self.inputs["train"]

    def built(self):
        """The learner, made from the prototype if it was not made yet."""
        if self.learner is None:
            self.learner = self.prototype.renewed(self.seed)
        if self.fit_options is not None:
            self.learner.fit_options = self.fit_options
        return self.learner


class Organization(Party):
    """A GAL-family party: one organization's column view, its own learner and local loss; it fits what Alice sends
    (a pseudo-residual, or labels for the centralized baselines) with a fresh learner each round — alone
    (:meth:`handle`) or with the other organizations of a batch in one pass (:meth:`handle_batch`) — and keeps its
    round models for the prediction stage."""

    def __init__(
        self,
        view: FeatureView,
        learner: str,
        loss: str,
        settings: LearnerSettings,
        device="cpu",
        output_noise: float = 0.0,
        seed: int = 0,
        place: int = 0,
    ):
        self.name = view.name
        self.seed, self.place = seed, place  # the round-t model draws from seed_for(seed, t, place)
        self.output_noise = output_noise  # σ of Gaussian noise on its outputs (a faulty organization)
        self.learner_name = learner
        self.loss = loss
        self.settings = settings
        self._view = view.to(device)
        self._models: list[tuple[int, int, int, object]] = []  # (round, seed, K, fitted learner)
        self._shared = None  # Deep Model Sharing: the one learner whose extractor every round shares
        self._prototypes: dict[tuple[int, str], object] = {}  # (outputs, loss) → what its learners are copies of
        self.train_losses: dict[int, float] = {}  # round → its model's local loss on the training rows
        self._writer = None  # this organization's own TensorBoard log, where it runs (log_round)
        self._folder: Path | None = None  # its own folder, once the run has one (open_logs)
        self._stacks: dict = {}  # the inputs of the batches it comes first in, stacked (handle_batch), kept a round

    @property
    def num_features(self) -> int:
        return self._view.num_features

    def device(self) -> torch.device:
        """Where this organization's data and models live."""
        return next(iter(self._view.splits.values())).device if self._view.splits else torch.device("cpu")

    @property
    def splits(self) -> list[str]:
        return list(self._view.splits)

    @property
    def view(self) -> FeatureView:
        """This organization's own columns (private: read where it runs, never sent)."""
        return self._view

    @property
    def shared_extractor(self):
        """Deep Model Sharing: the one learner whose extractor every kept round model uses (else None)."""
        return self._shared

    def kept_models(self) -> list[tuple[int, object]]:
        """``(round, model)`` for every round model kept for the prediction stage, oldest first."""
        return [(r, m) for r, _, _, m in self._models]

    @property
    def example_shape(self) -> tuple[int, ...]:
        return self._view.example_shape

    def _new_learner(self, out_features: int, seed: int, loss: str | None = None, shared: bool = False):
        return build_learner(
            self.learner_name, self.example_shape, out_features, loss or self.loss, seed, self.settings, shared
        )

    def handle(self, message: Message) -> Message:
        """This organization's reply to a message from Alice."""
        if isinstance(message, FIT_REQUESTS):
            job = self._job(message)
            job.built().fit(job.features, job.targets)
            return self._reply(job)
        if isinstance(message, PredictionRequest):
            return self.predict(message)
        if isinstance(message, ModelsRequest):
            return self.report(message)
        raise TypeError(f"{self.name} does not answer a {message.kind}.")

    @classmethod
    def handle_batch(cls, parties: list[Organization], messages: list[Message]) -> list[Message]:
        """The replies of several organizations in one process to a batch (:meth:`vcl.family.Party.handle_batch`): each
        fit request's job is made, all are fitted together (:func:`vcl.engine.concurrent.fit_jobs`), and each message is
        answered in order as :meth:`handle` answers it alone; a batch whose jobs cannot all be made is answered one by
        one. The stacked rows are kept by the first organization for the next round's batch, each holding its rows as
        their place in that stack."""
        fits = [i for i, m in enumerate(messages) if isinstance(m, FIT_REQUESTS)]
        try:
            jobs = {i: parties[i]._job(messages[i], batch=True) for i in fits} if len(fits) > 1 else {}
        except VCLInputError:
            jobs = {}
        if not jobs:
            return super().handle_batch(parties, messages)
        fit_jobs(list(jobs.values()), concurrent=True, stacked=parties[0]._stacks)
        for i, job in jobs.items():  # its rows as their place in the batch's stack: the same numbers, held once
            parties[i]._view.splits.update(job.inputs)
        return [parties[i]._reply(jobs[i]) if i in jobs else parties[i].handle(m) for i, m in enumerate(messages)]

    def _job(self, message: PseudoResidual | Labels, batch: bool = False) -> FitJob:
        """A fresh learner (its loss: the message's for labels, else its own) and its data for this round (``batch``:
        a copy of its mapping of splits, which the batch's fit may point at the batch's stack); a message it cannot
        fit, or of a round before the last it fitted, refused (:func:`check_fit`)."""
        last = self._models[-1][0] if self._models else None
        check_fit(self.name, message, len(self._view.splits["train"]), last)
        targets = message.values.to(self._view.splits["train"].device)
        seed, loss = seed_for(self.seed, message.round, self.place), getattr(message, "loss", None)
        options = self._fit_options(message.round)
        splits = dict(self._view.splits) if batch else self._view.splits
        if self.settings.dms:
            if self._shared is None:
                self._shared = self._new_learner(targets.shape[1], seed, loss, shared=True)
            return FitJob(message, self._shared, splits, targets, seed, fit_options=options)
        k, loss = targets.shape[1], loss or self.loss
        if (k, loss) not in self._prototypes:
            shape = self.example_shape
            self._prototypes[(k, loss)] = learner_prototype(self.learner_name, shape, k, loss, self.settings)
        prototype = self._prototypes[(k, loss)]
        learner = self._new_learner(k, seed, loss) if prototype is None else None  # else made when needed
        return FitJob(message, learner, splits, targets, seed, prototype, fit_options=options)

    def _reply(self, job: FitJob) -> FittedValues:
        """Keep the round model (for the prediction stage) and reply with its outputs on every split."""
        model = job.learner.round_model(job.learner.rounds - 1) if self.settings.dms else job.learner
        self._models.append((job.message.round, job.seed, job.targets.shape[1], model))
        if job.outputs is None:  # fitted alone: predict its own rows
            job.outputs = {split: model.predict(x) for split, x in job.inputs.items()}
            loss = getattr(job.message, "loss", None) or self.loss
            job.train_loss = float(local_loss(as_float(job.outputs["train"]), job.targets.float(), loss))
        self.train_losses[job.message.round] = job.train_loss
        values = {split: self._output(out, job.seed, split) for split, out in job.outputs.items()}
        seconds = time.perf_counter() - job.started
        return FittedValues(self.name, job.message.sender, job.message.round, values, seconds=seconds)

    def open_logs(self, folder: Path) -> None:
        """Where this organization's own logs go (``folder/tensorboard``): under ``run.engine: trainer`` each fit's
        Trainer logs there too, one TensorBoard run per round (``round-<t>``)."""
        self._folder = Path(folder)

    def _fit_options(self, round_: int) -> dict | None:
        """The Trainer's logger folder and callbacks for the fit of ``round_`` (engine trainer only)."""
        if self.settings.engine != "trainer":
            return None
        log_dir = None if self._folder is None else self._folder / "tensorboard"
        return {"log_dir": log_dir, "version": f"round-{round_}", "callbacks": self.settings.callbacks}

    def log_round(self, folder: Path, round_: int) -> None:
        """Write this round's local training loss to this organization's own TensorBoard log under
        ``folder/tensorboard`` (where it runs; nothing crosses). Opened afresh after a resume, the log drops
        what an interrupted run wrote after its last checkpoint."""
        if round_ not in self.train_losses:
            return
        log = Path(folder) / "tensorboard"
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            after_last_event_file(log)
            self._writer = SummaryWriter(str(log), purge_step=round_)
        try:
            self._writer.add_scalar("local_loss/train", self.train_losses[round_], round_)
            self._writer.flush()
        except OSError as err:  # its writer thread's failed write (the folder removed, the disk full), met here
            with contextlib.suppress(OSError):
                self.close_logs()
            self._writer = None  # a new writer at the next round, once the folder is writable again
            why = f"its TensorBoard log could not be written ({err.strerror or err})"
            raise OSError(err.errno, why, str(log)) from None

    def close_logs(self) -> None:
        """Close this organization's TensorBoard log (its process may serve another run next)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _output(self, out: Tensor, seed: int, split: str) -> Tensor:
        """A model's outputs as sent: float32, plus this organization's output noise (seeded by model and split)."""
        out = as_float(out)
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
        device = self.device()
        self._view.splits[split] = features.to(device=device, dtype=torch.float32)

    def predict(self, message: PredictionRequest) -> FittedValues:
        """The prediction stage: every round model's outputs on the requested rows ({round: N × K}); none from an
        organization that kept no model (left out of every round it could have fitted: built again without rows)."""
        if not self._models:
            return FittedValues(self.name, message.sender, message.round, {})
        x = some_rows(self._view.splits[message.split], message.rows, self.name)
        shared = self._shared.predict_rounds(x) if self.settings.dms and self._shared is not None else None
        values = {
            str(r): self._output(learner.predict(x) if shared is None else shared[learner.index], s, message.split)
            for r, s, _, learner in self._models
        }
        return FittedValues(self.name, message.sender, message.round, values)

    # --- resumable state --------------------------------------------------------------------
    def preparation(self) -> list[dict] | None:
        """Its columns' fitted preparation, kept in its checkpoints: a finished run rebuilds it on new rows alone."""
        return kept_preparations(self._view)

    def state_dict(self) -> dict:
        if self.settings.dms:
            shared = None if self._shared is None else self._shared.shared_state()
            return {
                "shared": shared,
                "models": [(r, s, k, m.index) for r, s, k, m in self._models],
                "train_losses": dict(self.train_losses),
            }
        models = [(r, s, k, lr.state_dict()) for r, s, k, lr in self._models]
        return {"models": models, "train_losses": dict(self.train_losses)}

    def load_state_dict(self, state: dict) -> None:
        self.train_losses = dict(state.get("train_losses", {}))
        self._models = []
        if self.settings.dms:
            self._shared = None
            if state["shared"] is not None:
                r0, s0, k0, _ = state["models"][0]
                self._shared = self._new_learner(k0, s0, shared=True).to(self.device())
                self._shared.load_shared_state(state["shared"])
            self._models = [(r, s, k, self._shared.round_model(i)) for r, s, k, i in state["models"]]
            return
        for r, s, k, sd in state["models"]:
            learner = self._new_learner(k, s)
            learner.load_state_dict(sd)
            self._models.append((r, s, k, learner))

    def stored_parameters(self) -> int:
        """Parameters of the torch models this organization keeps for prediction (a shared extractor once)."""
        modules = {id(m): m for m in (getattr(x, "learner", x) for _, _, _, x in self._models)}
        return sum(p.numel() for m in modules.values() if hasattr(m, "parameters") for p in m.parameters())

    def report(self, message: ModelsRequest) -> ModelsReport:
        return ModelsReport(
            self.name, message.sender, message.round, len(self._models), self.stored_parameters(), self.settings.dms
        )


def some_rows(x, rows, name: str):
    """``x``'s rows at the positions ``rows`` (a prediction service's batch, :mod:`vcl.use.serve`: a tensor or a
    list of whole numbers; None: every row), ``x`` a tensor or a NumPy array; one sentence (a malformed request) for
    anything but positions of rows of ``x``."""
    if rows is None:
        return x
    try:
        index = torch.as_tensor(rows)
    except (TypeError, ValueError, RuntimeError):
        index = None
    n = x.shape[0]
    ok = index is not None and index.ndim == 1 and (index.dtype == torch.long or index.numel() == 0)
    if not ok or (index.numel() and (int(index.min()) < 0 or int(index.max()) >= n)):
        raise VCLInputError(f"{name}: the rows to predict must be a list of positions from 0 to {n - 1}.")
    index = index.to(torch.long)
    return x[index.to(x.device)] if isinstance(x, Tensor) else x[index.numpy()]


def check_fit(name: str, message: PseudoResidual | Labels, rows: int, last: int | None) -> None:
    """Refuse, in one sentence (:class:`vcl.errors.VCLInputError`: a malformed message, the sender's fault), what an
    organization cannot fit: values that are not an ``rows`` × K matrix of floats, or a round at or before ``last``,
    the round it fitted last (a party acts only on the round it serves). Values that are not finite are fitted: a
    diverging run sends them, and goes on to write its rounds (``tests/test_hostile.py``)."""
    values, kind = message.values, message.kind
    if not isinstance(values, Tensor) or not values.is_floating_point() or values.ndim != 2:
        what = f"a {values.ndim}-dimensional {values.dtype}" if isinstance(values, Tensor) else type(values).__name__
        raise VCLInputError(f"{name}: a {kind} must hold a matrix of floats, not {what}.")
    if values.shape[0] != rows or not 1 <= values.shape[1] <= MAX_OUTPUTS:
        raise VCLInputError(
            f"{name}: a {kind} of {values.shape[0]} × {values.shape[1]} values for its {rows} training rows "
            f"(and 1 to {MAX_OUTPUTS} outputs a row)."
        )
    if type(message.round) is not int or (last is not None and message.round <= last):
        raise VCLInputError(f"{name}: a {kind} of round {message.round!r} after its fit of round {last}.")
