"""Intermediate fusion (a centralized baseline of the GAL paper, 'Interm'; docs/gal.md). One round.

Per minibatch each organization's extractor sends its representation (:class:`~vcl.engine.split_network.Activations`),
Alice averages them into her last layer, sends back its error (:class:`~vcl.engine.split_network.ActivationGradient`);
with clipping, the gradient norms too (:class:`~vcl.messages.Scalars`)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from vcl.config import RunConfig
from vcl.engine.loop import minibatches, seeded_init, train_epochs
from vcl.engine.losses import local_loss
from vcl.engine.split_network import ActivationGradient, steps_for
from vcl.messages import as_float
from vcl.methods.gal.coordinator import gal_organizations
from vcl.methods.messages import Scalars
from vcl.protocol import Protocol, RoundRecord


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


def build(config: RunConfig, data, method: str, family) -> IntermFusion:
    """Interm fusion over the GAL family's organizations (``family``: :class:`vcl.methods.gal.GAL`, whose
    ``parties`` makes their parts, :mod:`vcl.methods.gal.party`)."""
    task, _, labels, fed = gal_organizations(config, method, data, family)
    return IntermFusion(task, fed, labels, seed=config.run.seed)
