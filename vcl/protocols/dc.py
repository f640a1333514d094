"""Interpretable Data Collaboration (DC) analysis (SMOTE-anchor paper, Algorithm 1) and its references.

c × d workers: worker (i, j) holds X_{i,j} (row group i, column group j) and Y_i. One shot:

1. the workers agree on anchor data X^anc (:mod:`vcl.anchors`; shares go worker → worker);
2. each fits its own dimensionality reduction f_ij on X_{i,j} and sends the master only the reduced
   representations of its rows and of the anchors (:class:`ReducedRepresentation`);
   one worker per row group sends Y_i;
3. the master takes the top m̂ left singular vectors Z of [X̃_1^anc, …, X̃_c^anc] (scaled by √r so the
   collaboration features have unit mean square on the anchors; any nonsingular scaling is allowed),
   G_i = argmin ‖Z − X̃_i^anc G_i‖ (least squares), X̂ = [X̃_1 G_1; …; X̃_c G_c], fits the central
   model h(X̂) ≈ Y and returns Y_i^anc = h(X̃_i^anc G_i) to row group i's workers;
4. each worker fits the interpretable model t_i(X^anc) ≈ Y_i^anc (a decision tree with a split limit,
   or gradient boosting) whose feature importances say which features matter.

References (Section 4): Centralized shares the raw rows and fits the interpretable model on (X, Y);
Local fits it on each party's own (X_{i,j}, Y_i). Evaluation uses an experimenter's view of the data
(:class:`Evaluation`) that no party or master reads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from sklearn.base import is_classifier
from torch import Tensor

from vcl.anchors import AnchorConstruction, GridLayout, make_anchor_construction
from vcl.config import DCGroup, RunConfig
from vcl.datamodules.grid import GridData, GridDataModule
from vcl.datamodules.tabular import FeatureView
from vcl.dc_metrics import accuracy, amd, dice, emd, nmi, top_features
from vcl.errors import VCLInputError
from vcl.federation import Federation
from vcl.loop import seed_for
from vcl.messages import EXPERIMENTER, Ack, Labels, Message, Step, as_float
from vcl.models.sklearn import dump_estimator, load_estimator
from vcl.protocols.base import Protocol
from vcl.tasks import Task
from vcl.wiring import open_transport, shared_data_options


# --- the messages of this protocol step (each declares its tensors once; see vcl.messages) ---
@dataclass(frozen=True)
class AnchorShare(Message):
    """DC worker → worker: its contribution to the shared anchor data (column ranges for DC(rand), a
    perturbed low-rank approximation for DC(TSVD), raw rows for DC(raw); DC(SMOTE) needs none), with the
    sender's place (i, j) in the grid."""

    values: dict[str, Tensor] = field(repr=False)
    position: tuple[int, int] = (0, 0)

    tensors = {"*": "values"}


@dataclass(frozen=True)
class ReducedRepresentation(Message):
    """DC worker → master: dimensionality-reduced intermediate representations f_ij(·) of its private
    rows ({"train", "test"}) and of the anchor data ("anchor") — Algorithm 1 step 4."""

    values: dict[str, Tensor] = field(repr=False)

    tensors = {"*": "values"}


@dataclass(frozen=True)
class AnchorPredictions(Message):
    """DC master → worker: the central model's outputs on its row group's anchor representation,
    Y_i^anc = h(X̃_i^anc G_i) (r × K) — Algorithm 1 step 11."""

    values: Tensor = field(repr=False)

    tensors = {"anchor": "values"}


@dataclass(frozen=True)
class RawFeatures(Message):
    """Worker → master: its private rows themselves. Only DC's Centralized reference sends them."""

    values: Tensor = field(repr=False)

    tensors = {"train": "values"}


REDUCTIONS = ("pca", "tsvd", "identity")
CENTRAL_MODELS = ("ridge", "gb")
INTERPRETABLE_MODELS = ("tree", "gb")
MASTER = "master"


# --- the scikit-learn pieces, by config name ---------------------------------------------------------
def _estimator(name: str, key: str):
    from vcl.models.sklearn import make_estimator

    return make_estimator(name, key)


def make_reduction(name: str, dim: int, seed: int):
    """A fresh worker-side dimensionality reduction f_ij with ``dim`` components."""
    if name == "pca":
        from sklearn.decomposition import PCA

        return PCA(n_components=dim, svd_solver="full")
    if name == "tsvd":
        from sklearn.decomposition import TruncatedSVD

        return TruncatedSVD(n_components=dim, random_state=seed)
    if name == "identity":
        from sklearn.preprocessing import FunctionTransformer

        return FunctionTransformer()
    if name.startswith("sklearn:"):
        est = _estimator(name, "dc.reduction")
        params = est.get_params()
        if "n_components" in params:
            est.set_params(n_components=dim)
        if "random_state" in params:
            est.set_params(random_state=seed)
        if not hasattr(est, "transform"):
            raise VCLInputError(f"dc.reduction={name!r} has no transform(); use a scikit-learn transformer.")
        return est
    raise VCLInputError(
        f"dc.reduction={name!r} is unknown; use one of {', '.join(REDUCTIONS)} or sklearn:sklearn.<module>.<Class>."
    )


def make_central(name: str, seed: int):
    """The master's analysis h: a regressor fits the one-hot Y (the paper's ridge), a classifier the labels."""
    if name == "ridge":
        from sklearn.linear_model import Ridge

        return Ridge()
    if name == "gb":
        from sklearn.ensemble import GradientBoostingClassifier

        return GradientBoostingClassifier(random_state=seed)
    if name.startswith("sklearn:"):
        est = _estimator(name, "dc.central")
        if "random_state" in est.get_params():
            est.set_params(random_state=seed)
        return est
    raise VCLInputError(
        f"dc.central={name!r} is unknown; use one of {', '.join(CENTRAL_MODELS)} or sklearn:sklearn.<module>.<Class>."
    )


def make_interpretable(name: str, splits: int, seed: int):
    """The worker-side interpretable classifier t_i: a tree with at most ``splits`` splits, or boosting."""
    if name == "tree":
        from sklearn.tree import DecisionTreeClassifier

        if splits < 1:
            raise VCLInputError(f"dc.tree_splits={splits}; allow the tree at least 1 split.")
        return DecisionTreeClassifier(max_leaf_nodes=splits + 1, random_state=seed)
    if name == "gb":
        from sklearn.ensemble import GradientBoostingClassifier

        return GradientBoostingClassifier(random_state=seed)
    if name.startswith("sklearn:"):
        est = _estimator(name, "dc.interpretable")
        from sklearn.linear_model._base import LinearClassifierMixin

        if not is_classifier(est) or not (
            hasattr(type(est), "feature_importances_") or isinstance(est, LinearClassifierMixin)
        ):
            raise VCLInputError(
                f"dc.interpretable={name!r} is not a classifier with feature_importances_ or coef_; "
                "use a tree, boosting or linear classifier."
            )
        if "random_state" in est.get_params():
            est.set_params(random_state=seed)
        return est
    raise VCLInputError(
        f"dc.interpretable={name!r} is unknown; use one of {', '.join(INTERPRETABLE_MODELS)} "
        "or sklearn:sklearn.<module>.<Class>."
    )


def importances(model, columns: list[int], num_features: int) -> np.ndarray:
    """The model's feature importances placed at its global ``columns`` (zero elsewhere)."""
    imp = getattr(model, "feature_importances_", None)
    if imp is None:
        imp = np.abs(np.atleast_2d(model.coef_)).sum(0)
    out = np.zeros(num_features)
    out[columns] = imp
    return out


def class_scores(model, X: np.ndarray, num_classes: int) -> np.ndarray:
    """(n, K) scores: class probabilities of a classifier, or a regressor's outputs for one-hot targets."""
    if is_classifier(model):
        out = np.zeros((X.shape[0], num_classes))
        out[:, model.classes_.astype(int)] = model.predict_proba(X)
        return out
    return np.asarray(model.predict(X), dtype=np.float64).reshape(X.shape[0], num_classes)


def fit_classes(model, X: np.ndarray, y: np.ndarray, num_classes: int):
    """Fit on labels (classifier) or on their one-hot matrix (regressor, the paper's ridge)."""
    if is_classifier(model):
        return model.fit(X, y)
    return model.fit(X, np.eye(num_classes)[y])


def collaboration_maps(anchor_reps: list[np.ndarray], dim: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Algorithm 1 step 7: Z = √r · (top ``dim`` left singular vectors of [X̃_1^anc, …, X̃_c^anc]) and
    G_i = argmin_G ‖Z − X̃_i^anc G‖_F for every row group i."""
    A = np.hstack(anchor_reps)
    r = A.shape[0]
    if not 1 <= dim <= min(A.shape):
        raise VCLInputError(f"dc.collab_dim={dim}; use 1..{min(A.shape)} for these anchor representations.")
    U = np.linalg.svd(A, full_matrices=False)[0]
    Z = U[:, :dim] * np.sqrt(r)
    return Z, [np.linalg.lstsq(Ai, Z, rcond=None)[0] for Ai in anchor_reps]


@dataclass
class DCOptions(DCGroup):
    """The ``dc`` options and the anchor construction the method names (``dc_smote`` → ``smote``)."""

    anchor: str = "smote"


def _np(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


# --- the DC messages to and from the experimenter ----------------------------------------------------
@dataclass(frozen=True)
class KeptModel(Message):
    """A worker (or the master) → the experimenter: the interpretable model it keeps (skops bytes), the global
    columns it reads, its place in the grid, and the anchors it built — to be scored outside the protocol."""

    model: Tensor = field(repr=False)
    columns: tuple[int, ...] = ()
    position: tuple[int, int] | None = None
    anchor: Tensor | None = field(repr=False, default=None)

    tensors = {"model": "model", "anchor": "anchor"}


@dataclass(frozen=True)
class ScoreRequest(Message):
    """Master → the experimenter: score the models kept by ``models`` (in that order). ``collab``: the central
    model's class scores of each row group's test rows (c × n_test × K), for the collaboration accuracy;
    ``local_train``: answer the Local reference's training-row scores too."""

    models: tuple[str, ...] = ()
    collab: Tensor | None = field(repr=False, default=None)
    local_train: bool = False

    tensors = {"collab": "collab"}


@dataclass(frozen=True)
class Scores(Message):
    """The experimenter → master: accuracy per split, the paper's scores, and (Local) the training scores."""

    split_metrics: dict[str, float] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    train: Tensor | None = field(repr=False, default=None)

    tensors = {"train": "train"}


class DCWorker:
    """Party (i, j): private X_{i,j} (train rows of group i, its columns; and its columns of the test
    rows), Y_i, and the public rows X_pub. Answers the master's :class:`Step` requests and its
    :class:`AnchorPredictions`; sends other workers only its anchor share; keeps f_ij, X^anc and t_i."""

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
        self.anchor = self.construction.build(self.layout, self._shares, self._public, rng).astype(np.float64)
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


class Experimenter:
    """Who scores a DC run, outside every party and the master: it holds the full rows and the labels
    (:class:`Evaluation`), receives the kept models (:class:`KeptModel`) and answers a
    :class:`ScoreRequest` with :class:`Scores`. Its messages are not the protocol's communication."""

    name = EXPERIMENTER

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

    def device(self) -> str:
        return "cpu"


class CollaborationProtocol(Protocol):
    """One-shot protocols over c × d workers, with the master as coordinator; ``F`` holds the analysis'
    class scores (N × K). The workers are reached only through the transport, by name (``grid[i][j]``);
    the experimenter scores the models they keep."""

    progress_header = ""
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

    def ask(self, step: str, names: list[str], peers: tuple[str, ...] = ()) -> list[Message]:
        """Send ``Step(step)`` to each of ``names``; their replies, in that order."""
        transport = self.federation.transport
        return transport.request_all((n, Step(MASTER, n, 1, step, {"peers": peers})) for n in names)

    def score(self, collab: np.ndarray | None = None, local_train: bool = False) -> Scores:
        request = ScoreRequest(MASTER, EXPERIMENTER, self.round, self.kept, None, local_train)
        if collab is not None:
            request = ScoreRequest(MASTER, EXPERIMENTER, self.round, self.kept, torch.from_numpy(collab), local_train)
        return self.federation.transport.request(EXPERIMENTER, request)

    def train_loss(self) -> float:
        """Mean squared error of F against the one-hot labels (the paper's ridge objective)."""
        onehot = torch.nn.functional.one_hot(self.labels["train"].long(), self.task.num_outputs).float()
        return float((self.F["train"].float() - onehot).pow(2).mean())

    def evaluate(self) -> dict[str, float]:
        if self.history and "split_metrics" in self.history[-1]:
            return dict(self.history[-1]["split_metrics"])
        return super().evaluate()

    def prediction_stage(self, upto: int | None = None) -> tuple[dict[str, float], int]:
        """The reported figures again, from a fresh prediction of the kept models on every split."""
        if self.round == 0:
            return self.evaluate(), 0
        return self.score().split_metrics, self.round

    def _finish(self, F_train: np.ndarray | None, collab: np.ndarray | None = None) -> dict:
        self.round = 1
        scored = self.score(collab, local_train=F_train is None)
        F_train = scored.train if F_train is None else F_train
        self.F["train"] = torch.as_tensor(F_train, dtype=torch.float32)
        return self._record(split_metrics=scored.split_metrics, scores=scored.scores)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "kept": list(self.kept)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.kept = tuple(state["kept"])


class DataCollaboration(CollaborationProtocol):
    """DC analysis with one anchor construction (dc_smote, dc_tsvd, dc_rand, dc_raw); the master is the
    coordinator and holds only what arrives: reduced representations and labels."""

    master: dict | None = None  # G_i and h, after the round

    def run_round(self) -> dict:
        r, transport = 1, self.federation.transport
        # 1. anchors: every worker sends its share to the others (worker → worker), then builds X^anc
        self.ask("anchor", self.flat, peers=tuple(self.flat))
        # 2. reduced representations and labels reach the master
        reps = dict(zip(self.flat, (m.values for m in self.ask("reduce", self.flat)), strict=True))
        Y = [m.values.long().numpy() for m in self.ask("labels", [row[0] for row in self.grid])]
        # 3. the master: collaboration representation, central analysis, anchors' predictions
        rep = {s: [np.hstack([_np(reps[w][s]) for w in row]) for row in self.grid] for s in ("train", "test", "anchor")}
        dim = self.options.collab_dim or min(a.shape[1] for a in rep["anchor"])
        _, G = collaboration_maps(rep["anchor"], dim)
        X_hat = np.vstack([x @ g for x, g in zip(rep["train"], G, strict=True)])
        K = self.task.num_outputs
        h = fit_classes(make_central(self.options.central, seed_for(self.seed, 0xCE7)), X_hat, np.concatenate(Y), K)
        y_anc = [as_float(torch.from_numpy(class_scores(h, a @ g, K))) for a, g in zip(rep["anchor"], G, strict=True)]
        transport.request_all(
            (w, AnchorPredictions(MASTER, w, r, y_anc[i])) for i, row in enumerate(self.grid) for w in row
        )
        self.master = {"G": G, "h": h}
        test = [class_scores(h, x @ g, K) for x, g in zip(rep["test"], G, strict=True)]
        self.F["test"] = torch.as_tensor(np.mean(test, axis=0), dtype=torch.float32)
        # 4. t_i of each row group (every worker of the group holds the same one) goes to the experimenter
        self.kept = tuple(row[0] for row in self.grid)
        self.ask("report", list(self.kept))
        return self._finish(class_scores(h, X_hat, K), collab=np.stack(test))

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

    def run_round(self) -> dict:
        raw = dict(zip(self.flat, (_np(m.values) for m in self.ask("raw", self.flat)), strict=True))
        blocks = []
        for row in self.grid:
            x = np.empty((raw[row[0]].shape[0], self.layout.num_features))
            for w, cols in zip(row, self.layout.column_groups, strict=True):
                x[:, cols] = raw[w]
            blocks.append(x)
        X = np.vstack(blocks)
        y = np.concatenate([m.values.long().numpy() for m in self.ask("labels", [row[0] for row in self.grid])])
        model = make_interpretable(self.options.interpretable, self.options.tree_splits, reference_seed(self.seed))
        self.model = model.fit(X, y)
        self.kept = (MASTER,)
        columns = tuple(range(self.layout.num_features))
        kept = KeptModel(MASTER, EXPERIMENTER, 1, dump_estimator(model), columns)
        self.federation.transport.request(EXPERIMENTER, kept)
        return self._finish(class_scores(model, X, self.task.num_outputs))


class Local(CollaborationProtocol):
    """Reference: every party fits the interpretable model on its own (X_{i,j}, Y_i); nothing is sent
    between parties (the experimenter scores each party's own model)."""

    name = "local"

    def run_round(self) -> dict:
        self.ask("local", self.flat)
        self.kept = tuple(self.flat)
        self.ask("report", list(self.kept))
        return self._finish(None)


# --- the DC family: how its runs are built (vcl.registry) -------------------------------------------------
PARTY_LOADS_ALL_DATA = True


def datamodule(config: RunConfig, only: int | None = None, ids: list[str] | None = None) -> GridDataModule:
    """c × d parties: row groups by column groups, plus the public rows the anchors start from."""
    d, dc = config.data, config.dc
    return GridDataModule(
        **shared_data_options(config),
        row_groups=dc.row_groups,
        column_groups=dc.column_groups,
        feature_split=dc.feature_split,
        public_rows=dc.public_rows,
        seed=config.run.seed,
        standardize=dc.standardize,
        assignment=d.assignment or None,
    )


def dc_options(config: RunConfig, method: str) -> DCOptions:
    return DCOptions(**asdict(config.dc), anchor=method.removeprefix("dc_"))


def parties(config: RunConfig, method: str, data: GridData, only: int | None = None, plan=None) -> list:
    """The c × d workers in row-major order, then the experimenter: every one, or only party ``only``
    (what a party's own process builds from the config, :mod:`vcl.ray_transport`)."""
    options = dc_options(config, method)
    c = len(data.parties)
    count = c * len(data.column_groups) + 1
    construction = None
    if method.startswith("dc_"):
        construction = make_anchor_construction(
            options.anchor,
            config.dc.anchor_rows,
            config.dc.smote_k,
            config.dc.smote_alpha,
            config.dc.tsvd_rank,
            config.dc.tsvd_delta,
        )
    layout = GridLayout(c, data.column_groups)
    parties = []
    for k in range(count) if only is None else [only]:
        if k == count - 1:
            evaluation = Evaluation({s: data.full(s) for s in data.labels}, data.labels, options, config.run.seed)
            rows = [row[0].splits["train"].shape[0] for row in data.parties]
            parties.append(Experimenter(evaluation, rows, data.num_classes))
            continue
        i, j = divmod(k, len(data.column_groups))
        worker = DCWorker(
            data.parties[i][j],
            (i, j),
            data.column_groups[j],
            data.group_labels[i],
            data.public,
            data.num_classes,
            options,
            config.run.seed,
            construction,
            layout,
        )
        _ = worker.dim  # a party too small for dc_dim fails here, before any work
        parties.append(worker)
    return parties


def build(config: RunConfig, data: GridData, method: str) -> CollaborationProtocol:
    """DC analysis (dc_smote, dc_tsvd, dc_rand, dc_raw) or a reference (centralized, local) on c × d workers,
    with the master as the coordinator and the experimenter as one more party."""
    grid = [[v.name for v in row] for row in data.parties]
    names = [n for row in grid for n in row] + [EXPERIMENTER]
    transport = open_transport(config, method, data, names, lambda: parties(config, method, data))
    task = Task(data.task, data.num_classes, "ce")
    cls = {"centralized": Centralized, "local": Local}.get(method, DataCollaboration)
    layout = GridLayout(len(grid), data.column_groups)
    options = dc_options(config, method)
    fed = Federation(transport=transport)
    return cls(task, fed, data.labels, grid, layout, options, seed=config.run.seed, name=method)


def check(config: RunConfig) -> None:
    """The reduction, the central model and the interpretable model are ones DC knows."""
    make_reduction(config.dc.reduction, 1, 0)
    make_central(config.dc.central, 0)
    make_interpretable(config.dc.interpretable, config.dc.tree_splits, 0)
