"""The master: DC's Algorithm 1 and the Centralized / Local references, reaching the workers and the
experimenter only by messages through the transport."""

from __future__ import annotations

import numpy as np
import torch

from vcl.coordinator.federation import Federation
from vcl.datamodules.grid import GridData
from vcl.engine.loop import seed_for
from vcl.engine.tasks import Task
from vcl.errors import VCLInputError
from vcl.messages import as_float
from vcl.methods.dc.anchors import GridLayout
from vcl.methods.dc.experimenter import reference_seed
from vcl.methods.dc.messages import AnchorPredictions, KeptModel, ScoreRequest, Scores
from vcl.methods.dc.models import class_scores, collaboration_maps, fit_classes, make_central, make_interpretable
from vcl.methods.dc.options import MASTER, DCOptions, _np, dc_options
from vcl.methods.experimenter import EXPERIMENTER
from vcl.models.sklearn import dump_estimator, load_estimator
from vcl.protocol import Protocol, RoundRecord


class CollaborationProtocol(Protocol):
    """One-shot protocols over c × d workers, with the master as coordinator; ``F`` holds the analysis'
    class scores (N × K). The workers are reached only through the transport, by name (``grid[i][j]``);
    the experimenter scores the models they keep."""

    name = "dc"
    max_rounds = 1

    def __init__(self, task, federation, labels, grid, layout: GridLayout, options: DCOptions, seed=0, name=None):
        super().__init__(task, federation, labels, seed, name)
        self.grid, self.layout, self.options = grid, layout, options
        self.kept: tuple[str, ...] = ()  # who keeps the models the run reports (workers, or the master)
        prior = torch.bincount(labels["train"].long(), minlength=task.num_outputs).float()
        prior = prior / prior.sum()
        self.F = {s: prior.expand(y.shape[0], -1).clone() for s, y in labels.items()}

    @property
    def flat(self) -> list[str]:
        return [w for row in self.grid for w in row]

    coordinator = MASTER

    def step_round(self) -> int:
        return 1  # its one round (self.round counts it once done)

    def score(self, collab: np.ndarray | None = None, local_train: bool = False) -> Scores:
        rows = None if collab is None else torch.from_numpy(collab)
        return self.federation.request(
            EXPERIMENTER, ScoreRequest(MASTER, EXPERIMENTER, self.round, self.kept, rows, local_train)
        )

    def train_loss(self) -> float:
        """Mean squared error of F against the one-hot labels (the paper's ridge objective)."""
        onehot = torch.nn.functional.one_hot(self.labels["train"].long(), self.task.num_outputs).float()
        return float((self.F["train"].float() - onehot).pow(2).mean())

    def evaluate(self) -> dict[str, float]:
        if self.history and "split_metrics" in self.history[-1]:
            return dict(self.history[-1]["split_metrics"])
        return super().evaluate()

    def predict(self, split: str, rows: torch.Tensor | None = None) -> torch.Tensor:
        """New rows (``train.py predict``): only DC's own model has a path for them (:class:`DataCollaboration`)."""

        raise VCLInputError(
            f"method {self.name} keeps no model that scores new people through the parties (its models read rows "
            "no single party holds); predict with a run of dc_smote, dc_tsvd, dc_rand or dc_raw."
        )

    def probabilities(self, F: torch.Tensor) -> torch.Tensor:
        """The master's class scores, clipped at 0 and normalized: its classifier's probabilities, or a regressor's
        outputs for one-hot targets (the paper's ridge) made into shares."""
        F = F.double().clamp(min=0)
        total = F.sum(1, keepdim=True)
        return torch.where(total > 0, F / total.clamp(min=1e-300), torch.full_like(F, 1.0 / F.shape[1]))

    def prediction_stage(self, upto: int | None = None) -> tuple[dict[str, float], int]:
        """The reported figures again, from a fresh prediction of the kept models on every split."""
        if self.round == 0:
            return self.evaluate(), 0
        return self.score().split_metrics, self.round

    def _finish(self, F_train: np.ndarray | None, collab: np.ndarray | None = None) -> RoundRecord:
        self.round = 1
        scored = self.score(collab, local_train=F_train is None)
        F_train = scored.train if F_train is None else F_train
        self.F["train"] = torch.as_tensor(F_train, dtype=torch.float32)
        return self.record(split_metrics=scored.split_metrics, scores=scored.scores)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "kept": list(self.kept)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.kept = tuple(state["kept"])


class DataCollaboration(CollaborationProtocol):
    """DC analysis with one anchor construction (dc_smote, dc_tsvd, dc_rand, dc_raw); the master is the
    coordinator and holds only what arrives: reduced representations and labels."""

    master: dict | None = None  # G_i and h, after the round

    def run_round(self) -> RoundRecord:
        r, fed = 1, self.federation
        # 1. anchors: every worker sends its share to the others (worker → worker), then builds X^anc
        self.ask(self.flat, "anchor", peers=tuple(self.flat))
        # 2. reduced representations and labels reach the master
        reps = dict(zip(self.flat, (m.values for m in self.ask(self.flat, "reduce", peers=())), strict=True))
        Y = [m.values.long().numpy() for m in self.ask([row[0] for row in self.grid], "labels", peers=())]
        # 3. the master: collaboration representation, central analysis, anchors' predictions
        rep = {s: [np.hstack([_np(reps[w][s]) for w in row]) for row in self.grid] for s in ("train", "test", "anchor")}
        dim = self.options.collab_dim or min(a.shape[1] for a in rep["anchor"])
        _, G = collaboration_maps(rep["anchor"], dim)
        X_hat = np.vstack([x @ g for x, g in zip(rep["train"], G, strict=True)])
        K = self.task.num_outputs
        h = fit_classes(make_central(self.options.central, seed_for(self.seed, 0xCE7)), X_hat, np.concatenate(Y), K)
        y_anc = [as_float(torch.from_numpy(class_scores(h, a @ g, K))) for a, g in zip(rep["anchor"], G, strict=True)]
        fed.request_all((w, AnchorPredictions(MASTER, w, r, y_anc[i])) for i, row in enumerate(self.grid) for w in row)
        self.master = {"G": G, "h": h}
        test = [class_scores(h, x @ g, K) for x, g in zip(rep["test"], G, strict=True)]
        self.F["test"] = torch.as_tensor(np.mean(test, axis=0), dtype=torch.float32)
        # 4. t_i of each row group (every worker of the group holds the same one) goes to the experimenter
        self.kept = tuple(row[0] for row in self.grid)
        self.ask(list(self.kept), "report", peers=())
        return self._finish(class_scores(h, X_hat, K), collab=np.stack(test))

    def predict(self, split: str, rows: torch.Tensor | None = None) -> torch.Tensor:
        """DC's model on the rows of ``split`` (every row group holds them, as the test rows; ``rows``: those of
        them, by position, :mod:`vcl.use.serve`): each worker maps its columns with its kept f_ij, the master maps
        each row group's into the collaboration space (its G_i) and applies h; the mean over the row groups, as the
        round computed F["test"]."""
        some = {} if rows is None else {"rows": [int(r) for r in rows]}
        replies = self.ask(self.flat, "represent", split=split, peers=(), **some)
        reps = {w: _np(m.values[split]) for w, m in zip(self.flat, replies, strict=True)}
        G, h, K = self.master["G"], self.master["h"], self.task.num_outputs
        rows = [np.hstack([reps[w] for w in row]) for row in self.grid]
        scores = [class_scores(h, x @ g, K) for x, g in zip(rows, G, strict=True)]
        return torch.as_tensor(np.mean(scores, axis=0), dtype=torch.float32)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "master": dump_estimator(self.master)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.master = load_estimator(state["master"])


class Centralized(CollaborationProtocol):
    """Reference: the workers send their raw rows; the master fits the interpretable model on (X, Y)."""

    name = "centralized"
    model = None  # the interpretable model the master fits on the pooled rows

    def state_dict(self) -> dict:
        return {**super().state_dict(), "model": dump_estimator(self.model)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.model = load_estimator(state["model"])

    def run_round(self) -> RoundRecord:
        raw = dict(zip(self.flat, (_np(m.values) for m in self.ask(self.flat, "raw", peers=())), strict=True))
        blocks = []
        for row in self.grid:
            x = np.empty((raw[row[0]].shape[0], self.layout.num_features))
            for w, cols in zip(row, self.layout.column_groups, strict=True):
                x[:, cols] = raw[w]
            blocks.append(x)
        X = np.vstack(blocks)
        y = np.concatenate(
            [m.values.long().numpy() for m in self.ask([row[0] for row in self.grid], "labels", peers=())]
        )
        model = make_interpretable(self.options.interpretable, self.options.tree_splits, reference_seed(self.seed))
        self.model = model.fit(X, y)
        self.kept = (MASTER,)
        columns = tuple(range(self.layout.num_features))
        kept = KeptModel(MASTER, EXPERIMENTER, 1, dump_estimator(model), columns)
        self.federation.request(EXPERIMENTER, kept)
        return self._finish(class_scores(model, X, self.task.num_outputs))


class Local(CollaborationProtocol):
    """Reference: every party fits the interpretable model on its own (X_{i,j}, Y_i); nothing is sent
    between parties (the experimenter scores each party's own model)."""

    name = "local"

    def run_round(self) -> RoundRecord:
        self.ask(self.flat, "local", peers=())
        self.kept = tuple(self.flat)
        self.ask(list(self.kept), "report", peers=())
        return self._finish(None)


def build(config, data: GridData, method: str, family) -> CollaborationProtocol:
    """DC analysis (dc_smote, dc_tsvd, dc_rand, dc_raw) or a reference (centralized, local) on c × d workers, with the
    master as the coordinator and the experimenter as one more party (``family``: :class:`vcl.methods.dc.DC`, which
    makes them)."""
    grid = [[v.name for v in row] for row in data.parties]
    names = [n for row in grid for n in row] + [EXPERIMENTER]
    fed = Federation.open(config, family, method, data, names, lambda: family.parties(config, method, data))
    task = Task(data.task, data.num_classes, "ce")
    cls = {"centralized": Centralized, "local": Local}.get(method, DataCollaboration)
    layout = GridLayout(len(grid), data.column_groups)
    return cls(task, fed, data.labels, grid, layout, dc_options(config, method), seed=config.run.seed, name=method)
