"""Intermediate fusion (a centralized baseline of the GAL paper, 'Interm').

Each organization's feature extractor (its learner's network without the last layer) maps its own
features to a hidden representation; Alice averages the representations and her last layer gives the
prediction. Everything is trained end to end on Alice's labels as one network split at the hidden layer:
per minibatch each organization sends its representation (:class:`~vcl.engine.split_network.Activations`) and Alice
sends back its error (:class:`~vcl.engine.split_network.ActivationGradient`); with gradient clipping the norms of
everyone's gradients cross too (:class:`~vcl.messages.Scalars`), so the network is clipped as one. The
minibatch schedule comes from the run's seed, which every organization holds. It is the reference GAL is
compared with (every minibatch crosses, as representations that carry far more than GAL's fitted values),
not a privacy-preserving method. One round.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from vcl.config import RunConfig
from vcl.datamodules.tabular import FeatureView, kept_preparations
from vcl.engine.loop import (
    DRAWS,
    Steps,
    build_optimizer,
    derived_seed,
    minibatches,
    seed_for,
    seeded_draws,
    seeded_init,
    train_epochs,
)
from vcl.engine.losses import local_loss
from vcl.engine.split_network import ActivationGradient, Activations
from vcl.family import Party
from vcl.messages import Ack, Message, Scalars, Step, as_float
from vcl.methods.assisted import organizations
from vcl.methods.columns import build_parties, make_task
from vcl.methods.gal.coordinator import column_options, federation
from vcl.methods.organization import some_rows
from vcl.models import LearnerSettings, build_learner
from vcl.protocol import Protocol, RoundRecord

HPARAMS = ("lr", "momentum", "weight_decay", "milestones", "gamma", "optimizer", "epochs", "batch_size", "grad_clip")


def steps_for(params, hp: dict) -> Steps:
    """The learner's optimizer, step schedule and clipping (``hp``: its settings) over ``params``: one part's."""
    keys = ("lr", "momentum", "weight_decay", "milestones", "gamma", "optimizer")
    return Steps(*build_optimizer(params, *(hp[k] for k in keys)), clip=hp["grad_clip"])


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


class IntermFusion(Protocol):
    name = "interm"
    max_rounds = 1

    def __init__(self, task, federation, labels: dict[str, Tensor], seed: int = 0):
        super().__init__(task, federation, labels, seed)
        setups = [r.figures for r in self.ask(self.federation.names, "setup")]
        widths = {s["width"] for s in setups}
        if len(widths) != 1:
            raise ValueError(f"interm averages hidden representations; the learners' widths differ: {sorted(widths)}.")
        self.hp = setups[0]  # Alice's own learner's settings train the whole network
        with seeded_init(seed):
            self.head = nn.Linear(widths.pop(), task.num_outputs).to(self.device)

    def run_round(self) -> RoundRecord:
        hp, task, fed = self.hp, self.task, self.federation
        alice, names = self.federation.alice, self.federation.names
        loss_name = "ce" if task.kind == "classification" else ("l1" if task.loss == "l1" else "l2")
        y = task.targets(self.labels["train"])
        steps = steps_for(self.head.parameters(), hp)
        gen = torch.Generator().manual_seed(self.seed)

        def schedule(epoch: int):  # the organizations draw the same from the run's seed
            return enumerate(minibatches(y.shape[0], hp["batch_size"], gen, min_rows=2, device=y.device))

        def step(epoch: int, batch) -> None:
            b, idx = batch
            hidden = self.ask(self.federation.names, "forward", epoch=epoch, batch=b, batch_size=hp["batch_size"])
            leaves = [a.values.to(self.device).requires_grad_(True) for a in hidden]
            steps.backward(local_loss(self.head(torch.stack(leaves).mean(0)), y[idx], loss_name))
            errors = [
                ActivationGradient(alice, m, self.round, as_float(leaf.grad))
                for m, leaf in zip(names, leaves, strict=True)
            ]
            replies = fed.request_all(zip(names, errors, strict=True))
            total = None
            if steps.clip:  # ‖∇‖ over every part of the network, in one order: the organizations', then the head's
                norms = torch.cat([*(r.values for r in replies), steps.grad_norms().cpu()])
                total = torch.linalg.vector_norm(norms)
                fed.request_all((m, Scalars(alice, m, self.round, total.reshape(1))) for m in names)
            steps.update(total)

        self.head.train()
        names = self.federation.names
        train_epochs(steps, hp["epochs"], schedule, step, epoch_end=lambda epoch: self.ask(names, "epoch_end"))
        self.F = {s: self.predict(s) for s in self.labels}
        self.round = 1
        return self.record()

    @torch.no_grad()
    def predict(self, split: str, rows: Tensor | None = None, chunk: int = 4096) -> Tensor:
        """The head on the mean of the parties' representations of ``split`` (``rows``: those of it, by position;
        :mod:`vcl.use.serve`), ``chunk`` rows a request."""
        self.head.eval()
        n = self.rows(split) if rows is None else len(rows)
        out = [torch.zeros(0, self.task.num_outputs, device=self.device)]
        for start in range(0, n, chunk):
            where = {"start": start, "stop": min(start + chunk, n)}
            if rows is not None:
                where = {"rows": [int(r) for r in rows[start : start + chunk]]}
            hidden = self.ask(self.federation.names, "predict", split=split, **where)
            out.append(self.head(torch.stack([a.values.to(self.device) for a in hidden]).mean(0)))
        return torch.cat(out)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "head": {k: v.cpu() for k, v in self.head.state_dict().items()}}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.head.load_state_dict(state["head"])


def parties(config: RunConfig, method: str, data, only: int | None = None, plan=None) -> list:
    """Each organization's part of the network: its extractor (Alice's also the head, in the protocol)."""
    options = column_options(config)
    k = make_task(config, data, options).num_outputs

    def part(plan, m, device):
        return IntermParty(plan.views[m], plan.learners[m], plan.settings, k, config.run.seed, m, device)

    return build_parties(config, method, data, part, only, plan, options)


def build(config: RunConfig, data, method: str, family) -> IntermFusion:
    """Interm fusion over the GAL family's organizations (``family``: :class:`vcl.methods.gal.GAL`, whose
    ``parties`` makes this module's parts)."""
    task, _, labels, transport = organizations(config, method, data, family.parties, column_options(config))
    return IntermFusion(task, federation(config, method, transport), labels, seed=config.run.seed)
