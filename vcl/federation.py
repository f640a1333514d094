"""The federation seen from Alice: her organizations, the channel, and one broadcast-and-gather step."""

from __future__ import annotations

import torch
from torch import Tensor

from vcl.messages import Channel, Labels, PredictionRequest, PseudoResidual, as_float
from vcl.organization import Organization, run_jobs, seed_for, stack_replies


class Federation:
    """Organizations (Alice first) reached only through ``channel``.

    ``concurrent`` fits same-architecture organizations in one pass (:mod:`models.concurrent`);
    ``False`` is the plain sequential reference.
    """

    def __init__(
        self,
        organizations: list[Organization],
        channel: Channel | None = None,
        concurrent=True,
        privacy=None,
        privacy_scope: str = "others",
    ):
        self.organizations = organizations
        self.channel = channel or Channel()
        self.concurrent = concurrent
        self.privacy = privacy  # a vcl.privacy mechanism applied to what Alice sends to the others
        # "others": Alice fits her own model on the clean residual; "all": on the same perturbed broadcast
        self.privacy_scope = privacy_scope

    @property
    def alice(self) -> str:
        return self.organizations[0].name

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.organizations]

    def __len__(self) -> int:
        return len(self.organizations)

    def gather_fits(
        self,
        round_: int,
        targets: Tensor,
        participants: list[int],
        seed: int,
        labels: bool = False,
        loss: str | None = None,
    ) -> dict[str, Tensor]:
        """Send ``targets`` to each participant, let each fit a fresh local model, gather its outputs.

        Returns {split: (len(participants), N, K)}. ``labels=True`` sends the labels themselves
        (centralized baselines) instead of a pseudo-residual. With a privacy mechanism, the others get
        one perturbed broadcast (seeded per round); Alice's own fit uses the clean values, or with
        ``privacy_scope="all"`` the same perturbed broadcast (the authors' code). Either way the
        returned outputs are weighed by Alice against the clean residual.
        """
        kind = Labels if labels else PseudoResidual
        clean = as_float(targets)
        public = clean
        if self.privacy is not None and not labels:
            gen = torch.Generator(device=clean.device).manual_seed(seed_for(seed, round_, 0x9A11))
            public = self.privacy(clean, gen)
        jobs = []
        for m in participants:
            org = self.organizations[m]
            values = clean if m == 0 and self.privacy_scope == "others" else public
            message = self.channel.send(kind(self.alice, org.name, round_, values))
            jobs.append(org.begin_fit(message, seed_for(seed, round_, m), loss))
        run_jobs(jobs, self.concurrent)
        replies = [self.channel.send(job.organization.finish_fit(job)) for job in jobs]
        return stack_replies(replies, clean.device)

    def predictions(self, split: str, round_: int) -> list[dict[str, Tensor]]:
        """Prediction stage: each organization's {round: outputs} on its rows of ``split``."""
        replies = []
        for org in self.organizations:
            request = self.channel.send(PredictionRequest(self.alice, org.name, round_, split))
            replies.append(self.channel.send(org.predict(request)).values)
        return replies

    def state_dict(self) -> dict:
        return {
            "channel": self.channel.state_dict(),
            "organizations": [o.state_dict() for o in self.organizations],
        }

    def load_state_dict(self, state: dict) -> None:
        self.channel.load_state_dict(state["channel"])
        for org, s in zip(self.organizations, state["organizations"], strict=True):
            org.load_state_dict(s)
