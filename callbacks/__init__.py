"""Round-level callbacks: TensorBoard, checkpoints, early stop on η, progress."""

from vcl.callbacks.base import RoundCallback
from vcl.callbacks.checkpoint import RoundCheckpoint
from vcl.callbacks.early_stop import EarlyStopOnEta
from vcl.callbacks.progress import ProgressTable
from vcl.callbacks.tensorboard import TensorBoardRounds

__all__ = [
    "EarlyStopOnEta",
    "ProgressTable",
    "RoundCallback",
    "RoundCheckpoint",
    "TensorBoardRounds",
]
