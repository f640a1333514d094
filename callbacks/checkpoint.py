"""A checkpoint of the run after every round (:mod:`vcl.storage.checkpoints` writes and loads the files)."""

from __future__ import annotations

from vcl.callbacks.base import RoundCallback

from vcl.storage.checkpoints import atomic_torch_save


class RoundCheckpoint(RoundCallback):
    """After every round: each party saves its own state under ``parties/<name>/`` (where it runs), then the
    coordinator's checkpoint, which holds only Alice's side, names the round; older party files go last."""

    filename = "last.ckpt"

    def on_round_end(self, run, record: dict) -> None:
        federation = run.protocol.federation
        federation.save(record["round"], run.stamp)
        saved = record["round"]  # named as saved with the rename itself: a signal cannot fall between them
        atomic_torch_save(
            run.checkpoint(),
            run.out_dir / "checkpoints" / self.filename,
            then=lambda: setattr(run, "saved_round", saved),
        )
        federation.prune(record["round"])
