"""Interpretable Data Collaboration (DC) analysis (SMOTE-anchor paper, Algorithm 1) and its references.

c × d workers: worker (i, j) holds X_{i,j} (row group i, column group j) and Y_i. One shot:

1. the workers agree on anchor data X^anc (:mod:`vcl.anchors`; shares go worker → worker);
2. each fits its own dimensionality reduction f_ij on X_{i,j} and sends the master only the reduced
   representations of its rows and of the anchors (:class:`~vcl.messages.ReducedRepresentation`);
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

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.base import is_classifier
from torch import Tensor

from models.sklearn import dump_estimator, load_estimator
from vcl.anchors import AnchorConstruction, GridLayout
from vcl.dc_metrics import accuracy, amd, dice, emd, nmi, top_features
from vcl.errors import VCLInputError
from vcl.messages import AnchorPredictions, AnchorShare, Labels, RawFeatures, ReducedRepresentation, as_float
from vcl.organization import FeatureView, seed_for
from vcl.protocols.base import Protocol

REDUCTIONS = ("pca", "tsvd", "identity")
CENTRAL_MODELS = ("ridge", "gb")
INTERPRETABLE_MODELS = ("tree", "gb")
MASTER = "master"


# --- the scikit-learn pieces, by config name ---------------------------------------------------------
def _import(name: str, key: str):
    from models.sklearn import estimator_class

    return estimator_class(name, key)


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
        est = _import(name, "dc_reduction")()
        params = est.get_params()
        if "n_components" in params:
            est.set_params(n_components=dim)
        if "random_state" in params:
            est.set_params(random_state=seed)
        if not hasattr(est, "transform"):
            raise VCLInputError(f"dc_reduction={name!r} has no transform(); use a scikit-learn transformer.")
        return est
    raise VCLInputError(
        f"dc_reduction={name!r} is unknown; use one of {', '.join(REDUCTIONS)} or sklearn:sklearn.<module>.<Class>."
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
        est = _import(name, "dc_central")()
        if "random_state" in est.get_params():
            est.set_params(random_state=seed)
        return est
    raise VCLInputError(
        f"dc_central={name!r} is unknown; use one of {', '.join(CENTRAL_MODELS)} or sklearn:sklearn.<module>.<Class>."
    )


def make_interpretable(name: str, splits: int, seed: int):
    """The worker-side interpretable classifier t_i: a tree with at most ``splits`` splits, or boosting."""
    if name == "tree":
        from sklearn.tree import DecisionTreeClassifier

        if splits < 1:
            raise VCLInputError(f"dc_tree_splits={splits}; allow the tree at least 1 split.")
        return DecisionTreeClassifier(max_leaf_nodes=splits + 1, random_state=seed)
    if name == "gb":
        from sklearn.ensemble import GradientBoostingClassifier

        return GradientBoostingClassifier(random_state=seed)
    if name.startswith("sklearn:"):
        est = _import(name, "dc_interpretable")()
        from sklearn.linear_model._base import LinearClassifierMixin

        if not is_classifier(est) or not (
            hasattr(type(est), "feature_importances_") or isinstance(est, LinearClassifierMixin)
        ):
            raise VCLInputError(
                f"dc_interpretable={name!r} is not a classifier with feature_importances_ or coef_; "
                "use a tree, boosting or linear classifier."
            )
        if "random_state" in est.get_params():
            est.set_params(random_state=seed)
        return est
    raise VCLInputError(
        f"dc_interpretable={name!r} is unknown; use one of {', '.join(INTERPRETABLE_MODELS)} "
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
        raise VCLInputError(f"dc_collab_dim={dim}; use 1..{min(A.shape)} for these anchor representations.")
    U = np.linalg.svd(A, full_matrices=False)[0]
    Z = U[:, :dim] * np.sqrt(r)
    return Z, [np.linalg.lstsq(Ai, Z, rcond=None)[0] for Ai in anchor_reps]


@dataclass
class DCOptions:
    anchor: str = "smote"
    reduction: str = "pca"
    dim: int = 5
    collab_dim: int = 0
    central: str = "ridge"
    interpretable: str = "tree"
    tree_splits: int = 5
    top_t: int = 3


def _np(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


class DCWorker:
    """Party (i, j): private X_{i,j} (train rows of group i, its columns; and its columns of the test
    rows), Y_i, and the public rows X_pub. Sends only messages; keeps f_ij, X^anc and t_i."""

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
    ):
        self.name = view.name
        self.position = position
        self.columns = columns
        self.num_classes = num_classes
        self.options = options
        self.seed = seed
        self._x = {s: _np(x) for s, x in view.splits.items()}
        self._y = labels.detach().cpu().numpy().astype(np.int64)
        self._public = _np(public)
        self.anchor: np.ndarray | None = None
        self.reduction = None
        self.model = None  # t_i (DC), or the Local reference's own model

    @property
    def dim(self) -> int:
        """m̃_ij: ``dim`` components, or m_j + dim when dim ≤ 0."""
        m_j, n_i = self._x["train"].shape[1], self._x["train"].shape[0]
        dim = self.options.dim if self.options.dim > 0 else m_j + self.options.dim
        if self.options.reduction == "identity":
            return m_j
        if not 1 <= dim <= min(m_j, n_i):
            raise VCLInputError(
                f"dc_dim={self.options.dim}: party {self.name} holds {m_j} columns of {n_i} rows, so it can "
                f"keep 1..{min(m_j, n_i)} dimensions; lower dc_dim (≤ 0 counts down from the party's columns)."
            )
        return dim

    # --- step 1: anchors ---------------------------------------------------------------------------
    def anchor_share(self, construction: AnchorConstruction) -> dict[str, np.ndarray]:
        """What this worker tells the others about its block (float32, as it travels)."""
        rng = np.random.default_rng(seed_for(self.seed, 0x75D, *self.position))
        share = construction.share(self._x["train"], rng)
        return {k: np.asarray(v, dtype=np.float32) for k, v in share.items()}

    def share_message(self, share: dict[str, np.ndarray], receiver: str, round_: int) -> AnchorShare:
        return AnchorShare(self.name, receiver, round_, {k: torch.from_numpy(v) for k, v in share.items()})

    def build_anchor(self, construction, layout: GridLayout, shares: dict, anchor_seed: int) -> None:
        rng = np.random.default_rng(anchor_seed)
        self.anchor = construction.build(layout, shares, self._public, rng).astype(np.float64)

    # --- step 2: reduced representations -----------------------------------------------------------
    def reduce(self, round_: int) -> ReducedRepresentation:
        self.reduction = make_reduction(self.options.reduction, self.dim, seed_for(self.seed, 0x4ED, *self.position))
        self.reduction.fit(self._x["train"])
        values = {s: self._transform(x) for s, x in self._x.items()}
        values["anchor"] = self._transform(self.anchor[:, self.columns])
        return ReducedRepresentation(self.name, MASTER, round_, values)

    def _transform(self, x: np.ndarray) -> Tensor:
        return as_float(torch.from_numpy(np.asarray(self.reduction.transform(x), dtype=np.float64)))

    def labels_message(self, round_: int) -> Labels:
        return Labels(self.name, MASTER, round_, as_float(torch.from_numpy(self._y)))

    def raw_message(self, round_: int) -> RawFeatures:
        return RawFeatures(self.name, MASTER, round_, as_float(torch.from_numpy(self._x["train"])))

    # --- step 4: the interpretable model -----------------------------------------------------------
    def fit_interpretable(self, message: AnchorPredictions) -> None:
        """t_i(X^anc) ≈ Y_i^anc: every worker of row group i fits the same model (same seed)."""
        y = message.values.argmax(-1).cpu().numpy()
        group_seed = seed_for(self.seed, 0x7E1, self.position[0])
        self.model = make_interpretable(self.options.interpretable, self.options.tree_splits, group_seed)
        self.model.fit(self.anchor, y)

    def fit_local(self) -> np.ndarray:
        """Local reference: the interpretable model on this party's own (X_{i,j}, Y_i); its train scores."""
        self.model = make_interpretable(
            self.options.interpretable, self.options.tree_splits, seed_for(self.seed, 0x10C, *self.position)
        )
        self.model.fit(self._x["train"], self._y)
        return class_scores(self.model, self._x["train"], self.num_classes)

    def state_dict(self) -> dict:
        return {"estimators": dump_estimator((self.anchor, self.reduction, self.model))}

    def load_state_dict(self, state: dict) -> None:
        self.anchor, self.reduction, self.model = load_estimator(state["estimators"])


class Evaluation:
    """The experimenter's view, outside every party and the master: the full rows and the labels, used
    only to score the outputs (test accuracy/NMI/Dice_t of the models, AMD/EMD of the anchors)."""

    def __init__(self, full: dict[str, Tensor], labels: dict[str, Tensor], options: DCOptions, seed: int):
        self.X = {s: _np(x) for s, x in full.items()}
        self.y = {s: y.cpu().numpy().astype(np.int64) for s, y in labels.items()}
        self.num_features = self.X["train"].shape[1]
        if not 1 <= options.top_t <= self.num_features:
            raise VCLInputError(f"dc_top_t={options.top_t}; use 1..{self.num_features} (the number of features).")
        self.top_t = options.top_t
        self.reference_seed = seed_for(seed, 0xCE0)
        reference = make_interpretable(options.interpretable, options.tree_splits, self.reference_seed)
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


class CollaborationProtocol(Protocol):
    progress_header = ""
    """One-shot protocols over c × d workers; ``F`` holds the analysis' class scores (N × K)."""

    name = "dc"
    max_rounds = 1

    def __init__(
        self,
        task,
        federation,
        labels,
        workers: list[list[DCWorker]],
        evaluation: Evaluation,
        options: DCOptions,
        seed=0,
    ):
        super().__init__(task, federation, labels, seed)
        self.workers = workers
        self.evaluation = evaluation
        self.options = options
        prior = torch.bincount(labels["train"].long(), minlength=task.num_outputs).float()
        prior = prior / prior.sum()
        self.F = {s: prior.expand(y.shape[0], -1).clone() for s, y in labels.items()}

    @property
    def flat(self) -> list[DCWorker]:
        return [w for row in self.workers for w in row]

    def train_loss(self) -> float:
        """Mean squared error of F against the one-hot labels (the paper's ridge objective)."""
        onehot = torch.nn.functional.one_hot(self.labels["train"].long(), self.task.num_outputs).float()
        return float((self.F["train"].float() - onehot).pow(2).mean())

    def evaluate(self) -> dict[str, float]:
        if self.history and "split_metrics" in self.history[-1]:
            return dict(self.history[-1]["split_metrics"])
        return super().evaluate()

    def kept_models(self) -> list[tuple[object, list[int]]]:
        """The interpretable models the parties keep after the round, each with the columns it reads."""
        raise NotImplementedError

    def prediction_stage(self, upto: int | None = None) -> tuple[dict[str, float], int]:
        """The reported figures again, from a fresh prediction of the kept models on every split."""
        if self.round == 0:
            return self.evaluate(), 0
        return self.evaluation.recognition(self.kept_models())[0], self.round

    def _finish(self, models, F_train: np.ndarray, **extra) -> dict:
        self.round = 1
        self.F["train"] = torch.as_tensor(F_train, dtype=torch.float32)
        split_metrics, scores = self.evaluation.recognition(models)
        return self._record(split_metrics=split_metrics, scores={**scores, **extra})


class DataCollaboration(CollaborationProtocol):
    """DC analysis with one anchor construction (dc_smote, dc_tsvd, dc_rand, dc_raw)."""

    def __init__(self, *args, construction: AnchorConstruction, layout: GridLayout, **kw):
        super().__init__(*args, **kw)
        self.construction, self.layout = construction, layout
        self.master: dict | None = None  # G_i and h, after the round

    def run_round(self) -> dict:
        r, channel, flat = 1, self.federation.channel, self.flat
        # 1. anchors: every worker builds the same X^anc from the shares it receives (worker → worker)
        shares = {w.position: w.anchor_share(self.construction) for w in flat}
        anchor_seed = seed_for(self.seed, 0xA7C)
        for w in flat:
            received = {w.position: shares[w.position]}
            for o in flat:
                if o is not w and shares[o.position]:
                    message = channel.send(o.share_message(shares[o.position], w.name, r))
                    received[o.position] = {k: v.numpy() for k, v in message.values.items()}
            w.build_anchor(self.construction, self.layout, received, anchor_seed)
        # 2. reduced representations and labels reach the master
        reps = {w.position: channel.send(w.reduce(r)).values for w in flat}
        Y = [channel.send(row[0].labels_message(r)).values.long().numpy() for row in self.workers]
        # 3. the master: collaboration representation, central analysis, anchors' predictions
        c, d = len(self.workers), len(self.workers[0])
        rep = {
            s: [np.hstack([_np(reps[(i, j)][s]) for j in range(d)]) for i in range(c)]
            for s in ("train", "test", "anchor")
        }
        dim = self.options.collab_dim or min(a.shape[1] for a in rep["anchor"])
        _, G = collaboration_maps(rep["anchor"], dim)
        X_hat = np.vstack([x @ g for x, g in zip(rep["train"], G, strict=True)])
        K = self.task.num_outputs
        h = fit_classes(make_central(self.options.central, seed_for(self.seed, 0xCE7)), X_hat, np.concatenate(Y), K)
        for i, row in enumerate(self.workers):
            y_anc = as_float(torch.from_numpy(class_scores(h, rep["anchor"][i] @ G[i], K)))
            for w in row:
                w.fit_interpretable(channel.send(AnchorPredictions(MASTER, w.name, r, y_anc)))
        self.master = {"G": G, "h": h}
        test = [class_scores(h, x @ g, K) for x, g in zip(rep["test"], G, strict=True)]
        self.F["test"] = torch.as_tensor(np.mean(test, axis=0), dtype=torch.float32)
        y_test = self.evaluation.y["test"]
        collab = float(np.mean([accuracy(y_test, t.argmax(1)) for t in test]))
        confidentiality = self.evaluation.confidentiality(flat[0].anchor)
        return self._finish(self.kept_models(), class_scores(h, X_hat, K), collab_accuracy=collab, **confidentiality)

    def kept_models(self) -> list[tuple[object, list[int]]]:
        """t_i of each row group (every worker of the group holds the same one), on all columns."""
        return [(row[0].model, list(range(self.layout.num_features))) for row in self.workers]

    def state_dict(self) -> dict:
        return {**super().state_dict(), "master": dump_estimator(self.master)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.master = load_estimator(state["master"])


class Centralized(CollaborationProtocol):
    """Reference: the workers send their raw rows; the master fits the interpretable model on (X, Y)."""

    name = "centralized"
    model = None  # the interpretable model the master fits on the pooled rows

    def kept_models(self) -> list[tuple[object, list[int]]]:
        return [(self.model, list(range(self.evaluation.num_features)))]

    def state_dict(self) -> dict:
        return {**super().state_dict(), "model": dump_estimator(self.model)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.model = load_estimator(state["model"])

    def run_round(self) -> dict:
        r, channel = 1, self.federation.channel
        m = self.evaluation.num_features
        blocks = []
        for row in self.workers:
            received = [(w.columns, _np(channel.send(w.raw_message(r)).values)) for w in row]
            x = np.empty((received[0][1].shape[0], m))
            for cols, values in received:
                x[:, cols] = values
            blocks.append(x)
        X = np.vstack(blocks)
        y = np.concatenate([channel.send(row[0].labels_message(r)).values.long().numpy() for row in self.workers])
        model = make_interpretable(self.options.interpretable, self.options.tree_splits, self.evaluation.reference_seed)
        model.fit(X, y)
        self.model = model
        return self._finish(self.kept_models(), class_scores(model, X, self.task.num_outputs))


class Local(CollaborationProtocol):
    """Reference: every party fits the interpretable model on its own (X_{i,j}, Y_i); nothing is sent."""

    name = "local"

    def run_round(self) -> dict:
        F = [np.mean([w.fit_local() for w in row], axis=0) for row in self.workers]
        return self._finish(self.kept_models(), np.vstack(F))

    def kept_models(self) -> list[tuple[object, list[int]]]:
        """Every party's own model on its own columns."""
        return [(w.model, w.columns) for w in self.flat]
