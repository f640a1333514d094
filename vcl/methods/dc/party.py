"""A DC worker: one party (i, j) of the grid, holding its block of rows and columns."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from vcl.datamodules.tabular import FeatureView
from vcl.engine.loop import seed_for
from vcl.errors import VCLInputError
from vcl.family import Party
from vcl.messages import Ack, Labels, Message, Step, as_float
from vcl.methods.dc.anchors import AnchorConstruction, GridLayout
from vcl.methods.dc.messages import AnchorPredictions, AnchorShare, KeptModel, RawFeatures, ReducedRepresentation
from vcl.methods.dc.models import make_interpretable, make_reduction
from vcl.methods.dc.options import MASTER, DCOptions, _np
from vcl.methods.experimenter import EXPERIMENTER
from vcl.methods.organization import some_rows
from vcl.models.sklearn import dump_estimator, load_estimator


class DCWorker(Party):
    """Party (i, j): private X_{i,j} (its columns of group i's train rows and of the test rows), Y_i, and the public
    rows X_pub. Answers the master's requests; sends other workers only its anchor share; keeps f_ij, X^anc and t_i."""

    def __init__(
        self,
        view: FeatureView,
        position: tuple[int, int],
        columns: list[int],
        labels: Tensor,
        public: Tensor,
        num_classes: int,
        options: DCOptions,
        seed: int,
        construction: AnchorConstruction | None = None,
        layout: GridLayout | None = None,
    ):
        self.name = view.name
        self.position = position
        self.columns = columns
        self.num_classes = num_classes
        self.options = options
        self.seed = seed
        self.construction, self.layout = construction, layout
        self._x = {s: _np(x) for s, x in view.splits.items()}
        self._y = labels.detach().cpu().numpy().astype(np.int64)
        self._public = _np(public)
        self._shares: dict[tuple[int, int], dict[str, np.ndarray]] = {}
        self._outbox: list[Message] = []
        self.anchor: np.ndarray | None = None
        self.reduction = None
        self.model = None  # t_i (DC), or the Local reference's own model
        self.model_columns: list[int] = []  # the global columns it reads (all for t_i, own for Local's)

    @property
    def dim(self) -> int:
        """m̃_ij: ``dim`` components, or m_j + dim when dim ≤ 0."""
        m_j, n_i = self._x["train"].shape[1], self._x["train"].shape[0]
        dim = self.options.dim if self.options.dim > 0 else m_j + self.options.dim
        if self.options.reduction == "identity":
            return m_j
        if not 1 <= dim <= min(m_j, n_i):
            raise VCLInputError(
                f"dc.dim={self.options.dim}: party {self.name} holds {m_j} columns of {n_i} rows, so it can "
                f"keep 1..{min(m_j, n_i)} dimensions; choose dc.dim in that range, or a value ≤ 0 above -{m_j} to "
                "count down from the party's columns."
            )
        return dim

    def handle(self, message: Message) -> Message | None:
        r = message.round
        if isinstance(message, AnchorShare):  # another worker's share: kept for building the anchors
            self._shares[message.position] = {k: v.numpy() for k, v in message.values.items()}
            return None
        if isinstance(message, AnchorPredictions):
            self.fit_interpretable(message)
            return Ack(self.name, message.sender, r)
        if not isinstance(message, Step):
            raise TypeError(f"{self.name} cannot answer a {message.kind}.")
        if message.step == "anchor":
            self.send_shares(message.args["peers"], r)
        elif message.step == "reduce":
            return self.reduce(r)
        elif message.step == "represent":  # rows to predict, mapped by the kept f_ij (train.py predict, serve)
            split = message.args["split"]
            x = some_rows(self._x[split], message.args.get("rows"), self.name)
            return ReducedRepresentation(self.name, message.sender, r, {split: self._transform(x)})
        elif message.step == "labels":
            return Labels(self.name, message.sender, r, as_float(torch.from_numpy(self._y)))
        elif message.step == "raw":
            return RawFeatures(self.name, message.sender, r, as_float(torch.from_numpy(self._x["train"])))
        elif message.step == "local":
            self.fit_local()
        elif message.step == "report":
            anchor = None if self.anchor is None else torch.from_numpy(self.anchor)
            blob = dump_estimator(self.model)
            self._outbox.append(
                KeptModel(self.name, EXPERIMENTER, r, blob, tuple(self.model_columns), self.position, anchor)
            )
        else:
            raise ValueError(f"{self.name} has no step {message.step!r}.")
        return Ack(self.name, message.sender, r)

    def outgoing(self) -> list[Message]:
        out, self._outbox = self._outbox, []
        return out

    def device(self) -> str:
        return "cpu"

    # --- step 1: anchors ---------------------------------------------------------------------------
    def send_shares(self, peers: tuple[str, ...], round_: int) -> None:
        """What this worker tells the others about its block (float32, as it travels)."""
        rng = np.random.default_rng(seed_for(self.seed, 0x75D, *self.position))
        share = self.construction.share(self._x["train"], rng)
        share = {k: np.asarray(v, dtype=np.float32) for k, v in share.items()}
        self._shares = {self.position: share}
        for peer in peers if share else ():
            if peer != self.name:
                values = {k: torch.from_numpy(v) for k, v in share.items()}
                self._outbox.append(AnchorShare(self.name, peer, round_, values, self.position))

    # --- step 2: reduced representations -----------------------------------------------------------
    def reduce(self, round_: int) -> ReducedRepresentation:
        """Build X^anc from the shares (every worker the same: the run's anchor seed), fit f_ij, answer."""
        rng = np.random.default_rng(seed_for(self.seed, 0xA7C))
        self.anchor = self.construction.anchor(self.layout, self._shares, self._public, rng).astype(np.float64)
        self.reduction = make_reduction(self.options.reduction, self.dim, seed_for(self.seed, 0x4ED, *self.position))
        self.reduction.fit(self._x["train"])
        values = {s: self._transform(x) for s, x in self._x.items()}
        values["anchor"] = self._transform(self.anchor[:, self.columns])
        return ReducedRepresentation(self.name, MASTER, round_, values)

    def _transform(self, x: np.ndarray) -> Tensor:
        return as_float(torch.from_numpy(np.asarray(self.reduction.transform(x), dtype=np.float64)))

    # --- step 4: the interpretable model -----------------------------------------------------------
    def fit_interpretable(self, message: AnchorPredictions) -> None:
        """t_i(X^anc) ≈ Y_i^anc: every worker of row group i fits the same model (same seed)."""
        y = message.values.argmax(-1).cpu().numpy()
        group_seed = seed_for(self.seed, 0x7E1, self.position[0])
        self.model = make_interpretable(self.options.interpretable, self.options.tree_splits, group_seed)
        self.model.fit(self.anchor, y)
        self.model_columns = list(range(self.anchor.shape[1]))

    def fit_local(self) -> None:
        """Local reference: the interpretable model on this party's own (X_{i,j}, Y_i)."""
        self.model = make_interpretable(
            self.options.interpretable, self.options.tree_splits, seed_for(self.seed, 0x10C, *self.position)
        )
        self.model.fit(self._x["train"], self._y)
        self.model_columns = list(self.columns)

    def state_dict(self) -> dict:
        return {"estimators": dump_estimator((self.anchor, self.reduction, self.model)), "columns": self.model_columns}

    def load_state_dict(self, state: dict) -> None:
        self.anchor, self.reduction, self.model = load_estimator(state["estimators"])
        self.model_columns = list(state["columns"])
