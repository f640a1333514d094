"""A per-round table on the console."""

from __future__ import annotations

from vcl.callbacks.base import RoundCallback


class ProgressTable(RoundCallback):
    def on_run_start(self, run) -> None:
        splits = list(run.protocol.evaluate())  # the splits the protocol scores
        self.splits = splits
        self.extra = run.protocol.progress_header
        extra = [self.extra] if self.extra else []
        cols = ["round", "train loss", *[f"{s} {run.metric_name}" for s in splits], *extra, "bytes sent"]
        members = run.protocol.federation.members
        run.log(f"{run.protocol.name} on {run.config.data.dataset}: {len(members)} organizations")
        run.log(" | ".join(f"{c:>12}" for c in cols))

    def on_round_end(self, run, record: dict) -> None:
        extra = [run.protocol.progress_value(record)] if self.extra else []
        cells = [
            str(record["round"]),
            f"{record['train_loss']:.4f}",
            *[f"{record['metrics'][s]:.4f}" for s in self.splits],
            *extra,
            str(record["bytes_sent"]),
        ]
        run.log(" | ".join(f"{c:>12}" for c in cells))
