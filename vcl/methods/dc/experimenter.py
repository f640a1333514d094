"""Who scores a DC run from outside it: the raw data, the kept models, the paper's metrics."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from vcl.engine.loop import seed_for
from vcl.errors import VCLInputError
from vcl.messages import Ack, Message
from vcl.methods.dc.messages import KeptModel, ScoreRequest, Scores
from vcl.methods.dc.metrics import accuracy, amd, dice, emd, nmi, top_features
from vcl.methods.dc.models import class_scores, importances, make_interpretable
from vcl.methods.dc.options import MASTER, DCOptions, _np
from vcl.methods.experimenter import Experimenter
from vcl.models.sklearn import load_estimator


class Evaluation:
    """The experimenter's scoring: the full rows and the labels, used only to score the outputs (test
    accuracy/NMI/Dice_t of the models, AMD/EMD of the anchors)."""

    def __init__(self, full: dict[str, Tensor], labels: dict[str, Tensor], options: DCOptions, seed: int):
        self.X = {s: _np(x) for s, x in full.items()}
        self.y = {s: y.cpu().numpy().astype(np.int64) for s, y in labels.items()}
        self.num_features = self.X["train"].shape[1]
        if not 1 <= options.top_t <= self.num_features:
            raise VCLInputError(f"dc.top_t={options.top_t}; use 1..{self.num_features} (the number of features).")
        self.top_t = options.top_t
        reference = make_interpretable(options.interpretable, options.tree_splits, reference_seed(seed))
        reference.fit(self.X["train"], self.y["train"])
        self.reference = reference  # Centralized's model: its top-t features are F*_t
        self.reference_top = top_features(
            importances(reference, list(range(self.num_features)), self.num_features), self.top_t
        )

    def recognition(self, models: list[tuple[object, list[int]]]) -> tuple[dict[str, float], dict[str, float]]:
        """Mean over models of accuracy per split, and of test accuracy, NMI and Dice_t."""
        per_split = {s: [] for s in self.X}
        nmis, dices = [], []
        for model, cols in models:
            for s, X in self.X.items():
                pred = model.predict(X[:, cols])
                per_split[s].append(accuracy(self.y[s], pred))
                if s == "test":
                    nmis.append(nmi(self.y[s], pred))
            top = top_features(importances(model, cols, self.num_features), self.top_t)
            dices.append(dice(self.reference_top, top))
        split_metrics = {s: float(np.mean(v)) for s, v in per_split.items()}
        scores = {
            "accuracy": split_metrics["test"],
            "nmi": float(np.mean(nmis)),
            f"dice{self.top_t}": float(np.mean(dices)),
        }
        return split_metrics, scores

    def confidentiality(self, anchor: np.ndarray) -> dict[str, float]:
        X = self.X["train"]
        out = {"amd_raw": amd(X, anchor), "amd_anc": amd(anchor, X)}
        distance = emd(X, anchor)
        if distance is not None:
            out["emd"] = distance
        return out


def reference_seed(seed: int) -> int:
    """The seed of the interpretable model fitted on every row (Centralized; the experimenter's F*_t)."""
    return seed_for(seed, 0xCE0)


class DCExperimenter(Experimenter):
    """Who scores a DC run, outside every party and the master: it holds the full rows and the labels, receives the
    kept models and answers a :class:`ScoreRequest` with :class:`Scores`. Not the protocol's communication."""

    def __init__(self, evaluation: Evaluation, group_rows: list[int], num_classes: int):
        self.evaluation = evaluation
        self.group_rows = group_rows  # training rows per row group (the Local reference's training scores)
        self.num_classes = num_classes
        self.kept: dict[str, KeptModel] = {}

    def handle(self, message: Message) -> Message | None:
        if isinstance(message, KeptModel):
            self.kept[message.sender] = message  # from the master, a request (answered); from a worker, not
            return Ack(self.name, message.sender, message.round) if message.sender == MASTER else None
        if not isinstance(message, ScoreRequest):
            raise TypeError(f"the experimenter cannot answer a {message.kind}.")
        kept = [self.kept[name] for name in message.models]
        models = [(load_estimator(k.model), list(k.columns)) for k in kept]
        split_metrics, scores = self.evaluation.recognition(models)
        if message.collab is not None:
            y_test = self.evaluation.y["test"]
            scores["collab_accuracy"] = float(np.mean([accuracy(y_test, t.argmax(1)) for t in message.collab.numpy()]))
        anchor = next((k.anchor for k in kept if k.anchor is not None), None)
        if anchor is not None and message.collab is not None:
            scores.update(self.evaluation.confidentiality(anchor.numpy()))
        train = None
        if message.local_train:
            train = torch.as_tensor(self.local_train_scores(kept, models), dtype=torch.float32)
        return Scores(self.name, message.sender, message.round, split_metrics, scores, train)

    def local_train_scores(self, kept: list[KeptModel], models: list) -> np.ndarray:
        """Each row group's training rows scored by the mean of its parties' own models on their own columns."""
        X, K = self.evaluation.X["train"], self.num_classes
        starts = np.cumsum([0, *self.group_rows])
        F = []
        for i in range(len(self.group_rows)):
            rows = X[starts[i] : starts[i + 1]]
            group = [
                class_scores(m, rows[:, cols], K)
                for k, (m, cols) in zip(kept, models, strict=True)
                if k.position[0] == i
            ]
            F.append(np.mean(group, axis=0))
        return np.vstack(F)

    def state_dict(self) -> dict:
        return {"kept": [dict(vars(k), columns=list(k.columns)) for k in self.kept.values()]}

    def load_state_dict(self, state: dict) -> None:
        kept = [KeptModel(**dict(k, columns=tuple(k["columns"]))) for k in state["kept"]]
        self.kept = {k.sender: k for k in kept}
