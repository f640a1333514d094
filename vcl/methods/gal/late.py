"""Late fusion (a centralized baseline of the GAL paper): every organization trains a model on the labels
themselves and Alice fuses their outputs, one round. ``fusion="mean"`` (default, the authors' code) or ``"sum"``
(the paper's text): docs/design.md ("Where the paper and the GAL authors' public code differ")."""

from __future__ import annotations

from vcl.config import RunConfig
from vcl.methods.assisted import AssistedProtocol
from vcl.methods.gal.coordinator import gal_organizations
from vcl.protocol import RoundRecord

FUSIONS = ("sum", "mean")


class LateFusion(AssistedProtocol):
    name = "late"
    max_rounds = 1
    starts_from_prior = False

    def __init__(self, task, federation, labels, fusion: str = "mean", seed: int = 0):
        super().__init__(task, federation, labels, seed)
        if fusion not in FUSIONS:
            raise ValueError(f"fusion={fusion!r}; use one of {', '.join(FUSIONS)}.")
        self.fusion = fusion

    def run_round(self) -> RoundRecord:
        task = self.task
        loss = "ce" if task.kind == "classification" else ("l1" if task.loss == "l1" else "l2")
        everyone = list(range(len(self.federation)))
        outputs = self.federation.gather_fits(1, task.targets(self.labels["train"]), everyone, labels=True, loss=loss)
        fuse = (lambda o: o.sum(0)) if self.fusion == "sum" else (lambda o: o.mean(0))
        self.F = {s: fuse(o) for s, o in outputs.items()}
        self.round = 1
        m = len(everyone)
        return self.record(coefficients=[1.0 if self.fusion == "sum" else 1.0 / m] * m)

    def stored_parameters(self) -> int:
        return sum(r.parameters for r in self.federation.models(self.round))


def build(config: RunConfig, data, method: str, family) -> LateFusion:
    """Late fusion over the GAL family's organizations (``family``: :class:`vcl.methods.gal.GAL`, which makes
    them), each fitting the labels."""
    task, _, labels, fed = gal_organizations(config, method, data, family)
    return LateFusion(task, fed, labels, fusion=config.gal.late_fusion, seed=config.run.seed)
