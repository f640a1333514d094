"""What every protocol at Alice shares: her labels, her running prediction F on each split, state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from vcl.engine.tasks import Task
from vcl.messages import Message, Step

if TYPE_CHECKING:
    from vcl.coordinator.federation import Federation


@dataclass
class RoundRecord:
    """What a protocol reports of one round to the runner: its number, Alice's training loss after it, the
    coefficients ``c_m^t`` its prediction stage weighs each organization's model with (None: no model kept), and
    what the method adds (``values``: GAL's η, ASCII's α, ...). ``record["eta"]`` reads any of them by name."""

    round: int
    train_loss: float
    coefficients: list[float] | None = None
    values: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict:
        """The record as results.json and a checkpoint's history keep it."""
        kept = {} if self.coefficients is None else {"coefficients": self.coefficients}
        return {"round": self.round, "train_loss": self.train_loss, **kept, **self.values}

    def __getitem__(self, key: str):
        return self.as_dict()[key]

    def get(self, key: str, default=None):
        return self.as_dict().get(key, default)


class Protocol:
    """A small state machine: ``run_round()`` advances one round and returns its record (:meth:`record`). ``F[split]``:
    Alice's output on that split (N × K), from F⁰ (:attr:`prior`). Opened without training data (``labels`` empty:
    ``train.py predict``) it takes F⁰ from the checkpoint and works on the CPU."""

    name = "protocol"
    max_rounds: int | None = None  # a protocol with a fixed number of rounds (Late: 1)
    predicts_upto = False  # True: predict(split, rows, upto) can stop at an earlier round
    progress_header = ""  # the protocol's own column in the console's per-round table ("": none)
    keeps_models = True  # False: the run reports its last round's outputs, not a fresh prediction (MPDL, FTL)
    shares_models = False  # True: a later round retrains what earlier round models share (their kept metrics differ)

    def __init__(
        self, task: Task, federation: Federation, labels: dict[str, Tensor], seed: int = 0, name: str | None = None
    ):
        self.name = name or self.name  # a configuration of the protocol runs under its method's name (alone)
        self.task = task
        self.federation = federation
        self.labels = labels
        self.seed = seed
        self.round = 0
        self.history: list[dict] = []
        self.stopped: str | None = None  # why the protocol ended before its last round (the runner stops)
        self.unlabelled: dict[str, int] = {}  # rows of splits without labels (train.py predict's "new")
        self.device = next((y.device for y in labels.values()), torch.device("cpu"))  # Alice's: her labels'
        self.prior = task.initial(labels["train"]) if "train" in labels else None  # F⁰ as one row (K,)
        self.F = {s: self.prior.expand(y.shape[0], task.num_outputs).clone() for s, y in labels.items()}

    def run_round(self) -> RoundRecord:
        raise NotImplementedError

    def rows(self, split: str) -> int:
        """How many rows ``split`` has (a labelled split's, or one of :attr:`unlabelled`)."""
        return self.labels[split].shape[0] if split in self.labels else self.unlabelled[split]

    @property
    def coordinator(self) -> str:
        """Who sends the protocol's requests: Alice (DC: the master; MPDL: the collaborator C)."""
        return self.federation.alice

    def step_round(self) -> int:
        """The round a step request carries (a one-shot protocol: its one round)."""
        return self.round

    def ask(self, names, step: str, **args) -> list[Message]:
        """Send ``Step(step, args)`` to each party in ``names``, all at once; their replies, in that order."""
        sender, round_ = self.coordinator, self.step_round()
        return self.federation.request_all([(n, Step(sender, n, round_, step, args)) for n in names])

    def predict(self, split: str, rows: Tensor | None = None) -> Tensor:
        """The prediction stage: Alice's output on the rows of ``split`` (``rows``: only those, by position, a
        prediction service's batch, :mod:`vcl.use.serve`) from what the run keeps. A protocol whose prediction can
        stop at an earlier round (``predicts_upto``) also takes ``upto``, the last round to use."""
        raise NotImplementedError

    def probabilities(self, F: Tensor) -> Tensor:
        """Class probabilities from the prediction ``F`` (``train.py predict``): ``softmax(F)``, F being the logits
        of the cross-entropy that GAL's Alice minimizes."""
        return torch.softmax(F.double(), dim=1)

    def prediction_stage(self, upto: int | None = None) -> tuple[dict[str, float], int]:
        """Alice's metric on every split from the models the run keeps (:meth:`predict`), with rounds 1..``upto``
        (default, or without ``predicts_upto``: all); returns it and the round used."""
        upto = self.round if upto is None else min(upto, self.round)
        if not self.predicts_upto:
            upto = self.round
        kwargs = {} if upto == self.round else {"upto": upto}
        return {s: self.task.metric(self.predict(s, **kwargs), y) for s, y in self.labels.items()}, upto

    def kept_round_metrics(self) -> dict[int, dict] | None:
        """{round t: {"metrics": {split: metric}, "auroc": {split: AUROC}}} of the kept models with rounds 1..t,
        recomputed at the end of a run by the prediction stage; ``None`` for a protocol without ``predicts_upto``."""
        return None

    def auroc(self, F: dict[str, Tensor] | None = None, splits=None) -> dict[str, float]:
        """{split: AUROC} of the predictions ``F`` (default: Alice's running F) for a binary task, else empty; a
        split whose labels hold one class is left out."""
        if not self.task.binary:
            return {}
        F = self.F if F is None else F
        splits = [s for s in (splits or self.labels) if s in F and s in self.labels]
        scores = {s: self.task.auroc(F[s], self.labels[s]) for s in splits}
        return {s: v for s, v in scores.items() if v is not None}

    def stored_parameters(self) -> int:
        """Torch parameters the organizations keep for the prediction stage (results.json); 0 unless known."""
        return 0

    def progress_value(self, record: dict) -> str:
        """The round's entry in the ``progress_header`` column (a protocol that names one says what it is)."""
        return ""

    def train_loss(self) -> float:
        return float(self.task.loss_value(self.F["train"], self.labels["train"]))

    def evaluate(self) -> dict[str, float]:
        """Alice's metric on every split at the current round."""
        return {s: self.task.metric(self.F[s], y) for s, y in self.labels.items()}

    def state_dict(self) -> dict:
        return {
            "round": self.round,
            "F": {s: f.detach().cpu() for s, f in self.F.items()},
            "prior": None if self.prior is None else self.prior.detach().cpu(),
            "history": list(self.history),
            "federation": self.federation.state_dict(),
            "stopped": self.stopped,
        }

    def load_state_dict(self, state: dict) -> None:
        self.round = state["round"]
        self.F = {s: f.to(self.device) for s, f in state["F"].items()}
        if state.get("prior") is not None:  # a checkpoint made before it kept F⁰: the labels' (they are here)
            self.prior = state["prior"].to(self.prior.device if self.prior is not None else self.device)
        self.history = list(state["history"])
        self.stopped = state.get("stopped")
        self.federation.load_state_dict(state["federation"])

    def record(self, coefficients: list[float] | None = None, **values) -> RoundRecord:
        """This round's record, kept in :attr:`history`: what ``run_round`` returns at its end, and round 0's (F⁰)
        before any round. ``coefficients`` and ``values``: as in :class:`RoundRecord`."""
        record = RoundRecord(self.round, self.train_loss(), coefficients, values)
        self.history.append(record.as_dict())
        return record


def weighted_sum(weights: Tensor, outputs: dict[str, Tensor]) -> dict[str, Tensor]:
    """Σ_m w_m f_m on every split."""
    return {s: torch.einsum("m,mnk->nk", weights, o) for s, o in outputs.items()}
