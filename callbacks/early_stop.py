"""Stop assisting when the assisted learning rate falls below a threshold (GAL Section 4.5)."""

from __future__ import annotations

from vcl.callbacks.base import RoundCallback


class EarlyStopOnEta(RoundCallback):
    def __init__(self, threshold: float):
        self.threshold = threshold

    def on_round_end(self, run, record: dict) -> None:
        eta = record.get("eta")
        if eta is None:
            return
        last = eta[-1] if isinstance(eta, list) else eta
        if abs(last) < self.threshold:
            run.should_stop = True
            run.log(f"early stop: |eta| = {abs(last):.3g} < {self.threshold:g} at round {record['round']}")
