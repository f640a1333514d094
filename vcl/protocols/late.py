"""Late fusion (a centralized baseline of the GAL paper): every organization trains a model on the
labels themselves and Alice averages their outputs (logits for classification). One round."""

from __future__ import annotations

from vcl.protocols.base import Protocol


class LateFusion(Protocol):
    name = "late"
    max_rounds = 1
    starts_from_prior = False

    def run_round(self) -> dict:
        task = self.task
        loss = "ce" if task.kind == "classification" else ("l1" if task.loss == "l1" else "l2")
        everyone = list(range(len(self.federation)))
        outputs = self.federation.gather_fits(
            1, task.targets(self.labels["train"]), everyone, self.seed, labels=True, loss=loss
        )
        self.F = {s: o.mean(0) for s, o in outputs.items()}
        self.round = 1
        m = len(everyone)
        return self._record(coefficients=[1.0 / m] * m)

    def kept_round_metrics(self) -> dict[int, dict[str, float]]:
        return self.metrics_by_round()
