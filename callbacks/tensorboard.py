"""TensorBoard logging per round: train loss, metric on every split, η, assistance weights, bytes,
ASCII's model weight α of every agent and its interchange bytes, and a protocol's further scores (DC:
NMI, Dice_t, AMD, EMD) under ``scores/``."""

from __future__ import annotations

from vcl.callbacks.base import RoundCallback


class TensorBoardRounds(RoundCallback):
    def __init__(self, subdir: str = "tensorboard"):
        self.subdir = subdir
        self.writer = None

    def on_run_start(self, run) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step drops events a crashed run logged after its last checkpoint.
        self.writer = SummaryWriter(str(run.out_dir / self.subdir), purge_step=run.protocol.round + 1)

    def on_round_end(self, run, record: dict) -> None:
        w, t = self.writer, record["round"]
        w.add_scalar("loss/train", record["train_loss"], t)
        for split, value in record["metrics"].items():
            w.add_scalar(f"{run.metric_name}/{split}", value, t)
        w.add_scalar("comm/bytes_sent", record["bytes_sent"], t)
        etas = record.get("eta")
        if etas is not None:
            for i, eta in enumerate(etas if isinstance(etas, list) else [etas]):
                w.add_scalar("eta" if not isinstance(etas, list) else f"eta/step{i}", eta, t)
        for name, weight in zip(run.organization_names, record.get("weights", []), strict=False):
            w.add_scalar(f"assistance_weight/{name}", weight, t)
        for name, alpha in zip(run.organization_names, record.get("alphas", []), strict=False):
            w.add_scalar(f"alpha/{name}", alpha, t)
        if "interchange_bytes" in record:
            w.add_scalar("comm/interchange_bytes", record["interchange_bytes"], t)
        for name, value in record.get("scores", {}).items():
            w.add_scalar(f"scores/{name}", value, t)
        w.flush()

    def teardown(self, run) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
