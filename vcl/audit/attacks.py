"""The attacks a curious receiver runs on what it kept, each written once, each scored beside its trivial baseline
and the attacker's own data alone (:class:`Score`); :func:`counted` keeps the strongest per receiver, target and
secret, :func:`exposure` its mean and worst. Threat model: docs/privacy.md."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from vcl.engine.split_network import ActivationGradient
from vcl.messages import Step

KNOWN = 40  # rows whose labels or features an attacker knows, where its attack assumes some
SWEEP = (0, 10, KNOWN)  # the known rows every audit tries: none (the attacks that need none), few, and KNOWN
ALPHAS = np.logspace(-4, 3, 8)  # the ridge penalties the attacker chooses among (leave-one-out on its known rows)
FEATURES = "features"
LABELS = "labels"  # the secrets attacks go after: an organization's columns, Alice's labels (and her residuals)


@dataclass
class Score:
    """One attack's result: ``score`` beside ``baseline`` (``metric``: accuracy, higher is worse for privacy; mae,
    lower is worse) and ``own``, the same learner on the attacker's own data alone with the same ``known`` rows (None:
    it holds none that bears on the target); ``beside``: other figures that frame it (the main task's metric);
    ``secret``: what it goes after (:data:`LABELS` or :data:`FEATURES`)."""

    attack: str
    receiver: str
    target: str
    held: str
    metric: str
    score: float
    baseline: float
    beside: dict = field(default_factory=dict)
    own: float | None = None
    known: int = 0
    secret: str = FEATURES

    @property
    def gain(self) -> float:
        """How far the attack beats its trivial baseline, in the metric's own direction (≤ 0: it learned nothing)."""
        return self.score - self.baseline if self.metric == "accuracy" else self.baseline - self.score

    @property
    def floor(self) -> float:
        """The better of the two baselines: the trivial one and the attacker's own data alone."""
        if self.own is None:
            return self.baseline
        return max(self.baseline, self.own) if self.metric == "accuracy" else min(self.baseline, self.own)

    @property
    def share(self) -> float:
        """What the messages add: the share of the way from :attr:`floor` to a perfect attack (accuracy 1, error 0);
        0 when it learned nothing the attacker could not have without them, 1 when it recovers everything."""
        if self.metric == "accuracy":
            return (self.score - self.floor) / (1.0 - self.floor) if self.floor < 1 else 0.0
        return (self.floor - self.score) / self.floor if self.floor > 0 else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "gain": self.gain, "share": self.share}


def counted(scores: list[Score], sweep: tuple[int, ...] = ()) -> list[dict]:
    """For each (receiver, target, secret) and each count of known rows (0 and ``sweep``): the strongest attack run
    on it by :attr:`Score.share` — the score a privacy claim is held to — among those that needed no more known rows
    (an attack that needs none counts at every count), with the names of the attacks tried."""
    best: dict[tuple, Score] = {}
    tried: dict[tuple, list[str]] = {}
    for a in scores:
        for known in sorted({0, *sweep, a.known}):
            if a.known != known and (a.known != 0 or known not in sweep):
                continue
            key = (a.receiver, a.target, a.secret, known)
            tried.setdefault(key, []).append(a.attack)
            if key not in best or a.share > best[key].share:
                best[key] = a
    return [{**best[k].as_dict(), "known": k[3], "tried": sorted(set(tried[k]))} for k in best]


def exposure(pairs: list[dict]) -> list[dict]:
    """Per secret and known rows, over the receiver-target pairs of :func:`counted`: the mean share (every receiver
    alike) and the worst pair's, clipped to [0, 1], with who that was."""
    groups: dict[tuple, list[dict]] = {}
    for p in pairs:
        groups.setdefault((p["secret"], p["known"]), []).append(p)
    out = []
    for (secret, known), ps in sorted(groups.items()):
        worst = max(ps, key=lambda p: p["share"])
        out.append({"secret": secret, "known": known, "mean": float(np.clip(np.mean([p["share"] for p in ps]), 0, 1)),
                    "worst": float(np.clip(worst["share"], 0, 1)), "worst_receiver": worst["receiver"],
                    "worst_target": worst["target"], "worst_attack": worst["attack"], "pairs": len(ps)})  # fmt: skip
    return out


def split_known(rows: int, known: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows the attacker knows (``known`` of them, at most half the rows, drawn with ``seed``) and the rest, which
    it is scored on."""
    order = np.random.default_rng(seed).permutation(rows)
    known = max(1, min(known, rows // 2))
    return np.sort(order[:known]), np.sort(order[known:])


def _matrix(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    return np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)


def _classify(x_known, y_known, x_rest) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression  # the audit's, after a run: not on a tabular run's path
    from sklearn.preprocessing import StandardScaler

    if len(np.unique(y_known)) < 2:  # the known rows hold one class: that is the guess
        return np.full(len(x_rest), y_known[0])
    scaler = StandardScaler().fit(np.vstack([x_known, x_rest]))  # the attacker holds every row's features
    model = LogisticRegression(max_iter=2000).fit(scaler.transform(x_known), y_known)
    return model.predict(scaler.transform(x_rest))


def _regress(x_known, y_known, x_rest) -> np.ndarray:
    from sklearn.linear_model import RidgeCV  # the audit's, after a run (0.25 s to import beside Lightning)
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(np.vstack([x_known, x_rest]))
    model = RidgeCV(alphas=ALPHAS).fit(scaler.transform(x_known), y_known)
    guess = model.predict(scaler.transform(x_rest))  # one target column comes back flat: give it y's shape
    return np.asarray(guess).reshape((len(x_rest), *np.shape(y_known)[1:]))


def _scores(truth: np.ndarray, guess: np.ndarray, classes: bool) -> tuple[float, float]:
    """The guess's accuracy and the majority rate, or its MAE and that of guessing the mean (per column, averaged)."""
    if classes:
        return float((guess == truth).mean()), float(np.bincount(truth).max() / len(truth))
    return float(np.abs(guess - truth).mean()), float(np.abs(truth - truth.mean(0)).mean())


def _learned(x, own, y, classes: bool, known: int, seed: int) -> tuple[float, float | None, float]:
    """The learner on [``own``, ``x``] from ``known`` rows of ``y``, scored on the others; the same on ``own`` alone
    (None without own data); the trivial baseline."""
    own = None if own is None else _matrix(own)
    both = x if own is None else np.hstack([own, x])
    k, rest = split_known(len(y), known, seed)
    fit = _classify if classes else _regress
    score, baseline = _scores(y[rest], fit(both[k], y[k], both[rest]), classes)
    alone = None if own is None else _scores(y[rest], fit(own[k], y[k], own[rest]), classes)[0]
    return score, alone, baseline


def infer_labels(received, labels, classes: bool, known: int = KNOWN, seed: int = 0, own=None):
    """Labels learned from ``received`` (N × D, what a receiver holds of each row) beside the receiver's ``own``
    columns (N × p, or None) and ``known`` rows' labels: (the accuracy, that of ``own`` alone, the majority rate) on
    the other rows (``classes``), or the MAEs and that of guessing the mean."""
    y = np.asarray(labels).reshape(-1)
    y = y.astype(np.int64) if classes else y.astype(np.float64)
    return _learned(_matrix(received), own, y, classes, known, seed)


def complete_model(
    own_train, outputs_train, labels_train, own_test, outputs_test, labels_test, classes: bool, known: int = KNOWN,
    seed: int = 0,
) -> tuple[float, float, float]:  # fmt: skip
    """Model completion (Fu et al. 2022, passive): from ``known`` labelled training rows, a learner on the receiver's
    own columns and its round models' outputs, scored on new people (the test rows). Returns its score, the same
    learner on the own columns alone (what the run added is the difference) and the majority rate (or the MAE of the
    mean)."""
    y_train, y_test = np.asarray(labels_train).reshape(-1), np.asarray(labels_test).reshape(-1)
    if classes:
        y_train, y_test = y_train.astype(np.int64), y_test.astype(np.int64)
    k, _ = split_known(len(y_train), known, seed)
    fit = _classify if classes else _regress
    own_tr, own_te = _matrix(own_train), _matrix(own_test)
    both_tr = np.hstack([own_tr, _matrix(outputs_train)])
    both_te = np.hstack([own_te, _matrix(outputs_test)])
    score, baseline = _scores(y_test, fit(both_tr[k], y_train[k], both_te), classes)
    alone, _ = _scores(y_test, fit(own_tr[k], y_train[k], own_te), classes)
    return score, alone, baseline


def infer_features(received, target, known: int = KNOWN, seed: int = 0, own=None):
    """Another holder's columns (``target``, N × p) learned from ``received`` (N × D) beside the receiver's ``own``
    columns (or None) and ``known`` rows of them: (the MAE on the other rows in units of each column's standard
    deviation, that of ``own`` alone, that of guessing each column's mean)."""
    y = _matrix(target)
    spread = y.std(0)
    y = (y - y.mean(0)) / np.where(spread > 0, spread, 1.0)
    return _learned(_matrix(received), own, y, False, known, seed)


def read_copy(copy, target) -> tuple[float, float]:
    """A received copy of another holder's rows (row-aligned, perhaps noisy or low-rank) read as those rows, with no
    known row: the MAE against ``target`` in units of each column's standard deviation, and that of guessing each
    column's mean (:func:`infer_features`'s units)."""
    y = _matrix(target)
    spread = np.where(y.std(0) > 0, y.std(0), 1.0)
    return _scores((y - y.mean(0)) / spread, (_matrix(copy) - y.mean(0)) / spread, classes=False)


def invert_map(anchor_in, anchor_out, received, target) -> tuple[float, float]:
    """A colluder's inversion of an affine reduction ``x ↦ xV + c``: the map fitted by least squares on rows whose
    inputs and outputs it holds (``anchor_in`` → ``anchor_out``, a shared anchor and its reduced form), then
    ``received`` (reduced private rows) mapped back through its pseudo-inverse. The MAE against ``target`` in units of
    each column's standard deviation, and that of guessing each column's mean (:func:`infer_features`'s units)."""
    a, r = _matrix(anchor_in), _matrix(anchor_out)
    coef, *_ = np.linalg.lstsq(np.hstack([a, np.ones((len(a), 1))]), r, rcond=None)
    v, c = coef[:-1], coef[-1]
    guess = (_matrix(received) - c) @ np.linalg.pinv(v)
    y = _matrix(target)
    spread = np.where(y.std(0) > 0, y.std(0), 1.0)
    return _scores((y - y.mean(0)) / spread, (guess - y.mean(0)) / spread, classes=False)


def per_row_gradients(messages, place) -> dict:
    """Each row's gradient as a split network's party got them (:class:`~vcl.engine.split_network.ActivationGradient`
    answering its ``forward`` step), one N × D block an epoch, per fit: ``messages`` the party's kept (round,
    direction, message); ``place(step)`` maps a forward step to (fit, epoch, the batch's row positions, the fit's
    rows) by replaying the schedule from the run seed the party holds, or None (a forward without gradient). Each
    gradient goes back on its batch's rows times the batch's size (the mean loss's gradient, per row)."""
    fits: dict = {}
    where = None
    for _, direction, m in messages:
        if direction != "in":
            continue
        if isinstance(m, Step) and m.step == "forward":
            where = place(m)
        elif isinstance(m, ActivationGradient) and where is not None:
            fit, epoch, rows, n = where
            g = m.values.numpy().reshape(len(rows), -1)
            fits.setdefault(fit, {}).setdefault(epoch, np.zeros((n, g.shape[1])))[rows] = g * len(rows)
            where = None
    return {fit: [epochs[e] for e in sorted(epochs)] for fit, epochs in fits.items()}


def gradient_label_attacks(receiver: str, target: str, epochs: list, y, classes: bool, own, sweep, seed: int):
    """The label attacks of split learning on a receiver's per-row gradients (Li et al., ICLR 2022; VFLAIR's norm and
    direction scoring, direct label inference), each a :class:`Score`: *direction scoring* with no known label (binary
    tasks: the rows' first-epoch gradients split by the sign of their projection on the gradients' main direction,
    the smaller side taken as the rarer class, which a linear top layer makes exact: every row's gradient is
    w·(p − y)); *norm scoring* (binary: the rows of larger gradient norm, as many as the smaller side, taken as the
    rarer class); and the learned attack on [``own`` columns, every epoch's gradients] with each count of ``sweep``
    known labels."""
    y = np.asarray(y).reshape(-1)
    metric = "accuracy" if classes else "mae"
    out = []
    if classes and len(np.unique(y)) == 2:
        first = epochs[0]
        majority = float(np.bincount(y).max() / len(y))
        u = np.linalg.svd(first, full_matrices=False)[2][0]  # the gradients' main direction (its sign unknown)
        side = first @ u > 0
        side = side if side.mean() <= 0.5 else ~side  # the smaller side: the rarer class
        rarer = int(np.argmin(np.bincount(y, minlength=2)))
        guess = np.where(side, rarer, 1 - rarer)
        held = "its first epoch's per-row gradients, no known label, which class is rarer"
        out.append(Score("direction scoring", receiver, target, held, "accuracy", float((guess == y).mean()),
                         majority, secret=LABELS))  # fmt: skip
        norms = np.linalg.norm(first, axis=1)
        guess = np.where(norms >= np.quantile(norms, 1 - side.mean()), rarer, 1 - rarer)
        held = "its first epoch's per-row gradient norms, no known label, which class is rarer"
        out.append(Score("norm scoring", receiver, target, held, "accuracy", float((guess == y).mean()), majority,
                         secret=LABELS))  # fmt: skip
    every = np.hstack(epochs)
    for k in sweep:
        score, alone, base = infer_labels(every, y, classes, k, seed, own=own)
        held = f"its columns, its per-row gradients of every epoch, {k} known labels"
        out.append(Score("gradient label inference", receiver, target, held, metric, score, base, own=alone, known=k,
                         secret=LABELS))  # fmt: skip
    return out
