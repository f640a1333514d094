"""Round-level callbacks: TensorBoard, checkpoints, early stop on η, progress."""

from callbacks.base import RoundCallback
from callbacks.checkpoint import RoundCheckpoint, atomic_torch_save
from callbacks.early_stop import EarlyStopOnEta
from callbacks.progress import ProgressTable
from callbacks.tensorboard import TensorBoardRounds

__all__ = [
    "EarlyStopOnEta",
    "ProgressTable",
    "RoundCallback",
    "RoundCheckpoint",
    "TensorBoardRounds",
    "atomic_torch_save",
]
