"""GAL's own party code: what its options decide of its organizations (:func:`column_options`, on either side: a party's
own process plans its organization from them as Alice plans every one), and beside its organizations
(:mod:`vcl.methods.organization`): an organization's part of the one network Interm fusion trains (its feature
extractor), reached only by messages (Alice's side: :mod:`vcl.methods.gal.interm`)."""

from __future__ import annotations

import torch
from torch import Tensor

from vcl.config import RunConfig
from vcl.datamodules.tabular import FeatureView, kept_preparations
from vcl.engine.loop import DRAWS, derived_seed, minibatches, seed_for, seeded_draws
from vcl.engine.split_network import ActivationGradient, Activations, steps_for
from vcl.family import Party
from vcl.messages import Ack, Message, Step, as_float
from vcl.methods.columns import ColumnOptions, build_parties, make_task
from vcl.methods.messages import Scalars
from vcl.methods.organization import some_rows
from vcl.models import LearnerSettings, build_learner


def column_options(config: RunConfig) -> ColumnOptions:
    """What GAL's options decide of the organizations (its ``gal`` group): the task and local losses, the
    noninformative and noisy organizations (GAL Tables 6, 17–21), the baselines' epochs, Deep Model Sharing."""
    g = config.gal
    return ColumnOptions(
        task_loss=g.task_loss,
        local_loss=tuple(g.local_loss),
        noninformative=tuple(g.noninformative_organizations),
        noisy=tuple(g.noisy_organizations),
        noise_sigma=g.noise_sigma,
        baseline_epochs=g.baseline_epochs,
        dms=g.dms,
    )


HPARAMS = ("lr", "momentum", "weight_decay", "milestones", "gamma", "optimizer", "epochs", "batch_size", "grad_clip")


class IntermParty(Party):
    """An organization in Interm fusion: its feature extractor, with its learner's optimizer and schedule,
    reached only by messages."""

    def __init__(
        self, view: FeatureView, learner: str, settings: LearnerSettings, outputs: int, seed: int, place: int, device
    ):
        self.name, self.seed, self.place = view.name, seed, place
        self.view = view.to(device)
        net = build_learner(learner, view.example_shape, outputs, "l2", seed_for(seed, 0, place), settings)
        self.hparams = {k: getattr(net.hparams, k) for k in HPARAMS}
        self.width = net.net[1].in_features
        self.extractor = net.net[0].to(device)
        self.steps = steps_for(self.extractor.parameters(), self.hparams)
        self.generator = torch.Generator().manual_seed(seed)  # the minibatch schedule, as Alice draws it
        self._batches: list[Tensor] = []
        self._hidden: Tensor | None = None

    def handle(self, message: Message) -> Message:
        if isinstance(message, ActivationGradient):  # Alice's error of the last representation
            self.steps.backward(self._hidden, message.values.to(self._hidden.device))
            self._hidden = None
            if self.steps.clip:  # first the norms of this part's gradients: the network is clipped as one
                return Scalars(self.name, message.sender, message.round, self.steps.grad_norms().cpu())
            self.steps.update()
            return Ack(self.name, message.sender, message.round)
        if isinstance(message, Scalars):  # the whole network's gradient norm: clip by it, then step
            self.steps.update(message.values.reshape(()))
            return Ack(self.name, message.sender, message.round)
        if not isinstance(message, Step):
            raise TypeError(f"{self.name} cannot answer a {message.kind}.")
        return getattr(self, f"step_{message.step}")(message, **message.args)

    def step_setup(self, message: Step) -> Ack:
        """Its representation's width, and its learner's training settings (Alice's own are the run's)."""
        return Ack(self.name, message.sender, message.round, {"width": self.width, **self.hparams})

    def step_forward(self, message: Step, epoch: int, batch: int, batch_size: int) -> Activations:
        """Its representation of a training minibatch (the epoch's schedule drawn at its first batch)."""
        x = self.view.splits["train"]
        if batch == 0:
            self._batches = minibatches(x.shape[0], batch_size, self.generator, device=x.device)
        rows = self._batches[batch]
        self.extractor.train()
        with seeded_draws(derived_seed(self.seed, DRAWS, self.place, epoch, batch), x.device):  # dropout
            self._hidden = self.extractor(x[rows])
        return Activations(self.name, message.sender, message.round, as_float(self._hidden))

    def step_epoch_end(self, message: Step) -> Ack:
        self.steps.epoch_end()
        return Ack(self.name, message.sender, message.round)

    @torch.no_grad()
    def step_predict(
        self, message: Step, split: str, start: int = 0, stop: int | None = None, rows: list[int] | None = None
    ) -> Activations:
        """Its representation of rows ``start:stop`` of ``split``, or of the rows at positions ``rows``."""
        self.extractor.eval()
        x = self.view.splits[split]
        hidden = self.extractor(some_rows(x, rows, self.name) if rows is not None else x[start:stop])
        return Activations(self.name, message.sender, message.round, as_float(hidden))

    def preparation(self) -> list[dict] | None:
        """Its columns' fitted preparation, kept in its checkpoints: a finished run rebuilds it on new rows alone."""
        return kept_preparations(self.view)

    def state_dict(self) -> dict:
        return {"extractor": {k: v.cpu() for k, v in self.extractor.state_dict().items()}}

    def load_state_dict(self, state: dict) -> None:
        self.extractor.load_state_dict(state["extractor"])

    def device(self) -> str:
        return str(next(self.extractor.parameters()).device)


def parties(config: RunConfig, method: str, data, only: int | None = None, plan=None) -> list:
    """Each organization's part of the network: its extractor (Alice's also the head, in the protocol)."""
    options = column_options(config)
    k = make_task(config, data, options).num_outputs

    def part(plan, m, device):
        return IntermParty(plan.views[m], plan.learners[m], plan.settings, k, config.run.seed, m, device)

    return build_parties(config, method, data, part, only, plan, options)
