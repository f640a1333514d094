"""What GAL's receivers can infer from what they kept, and what Alice's noise costs: the attacks (residual
recovery redraws the noise from every seed a receiver's config holds) and budgets of docs/privacy.md."""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from vcl.audit.attacks import (
    LABELS,
    Score,
    complete_model,
    gradient_label_attacks,
    infer_features,
    infer_labels,
    per_row_gradients,
)
from vcl.audit.budget import label_budget, laplace_budget, no_budget
from vcl.audit.run import COORDINATOR, KeptRun
from vcl.config import config_integers, party_copy
from vcl.engine.loop import minibatches, seed_for
from vcl.messages import Labels
from vcl.methods.gal.coordinator import BLIND, NOISE, broadcast_mechanism
from vcl.methods.messages import FittedValues, PseudoResidual

FITS = (PseudoResidual, Labels)
NOT_ATTACKED = {
    "interm": "Scalars (Interm with gradient clipping): one norm a minibatch of a party's whole parameter gradient, "
    "summed over the batch's rows, no row's own; Activations: Alice's feature inference on fitted values scores the "
    "same kind of map (here each organization's hidden layer, wider than GAL's outputs)",
}


def audit(run: KeptRun) -> dict:
    data, names = run.data(), run.names
    classes = data.task == "classification"
    metric = "accuracy" if classes else "mae"
    y_train, y_test = data.labels["train"].numpy(), data.labels["test"].numpy()
    attacks: list[Score] = []
    read: dict[int, float] = {}
    majority = float(np.bincount(y_train).max() / len(y_train)) if classes else None
    for m, name in enumerate(names[1:], start=1):
        own = data.views[m].splits["train"]
        got = run.received(name, FITS)
        values = [msg.values.numpy().reshape(len(y_train), -1) for msg in got]
        if classes and values:
            mine = {msg.round: float((v.argmax(1) == y_train).mean()) for msg, v in zip(got, values, strict=True)}
            for t, accuracy in mine.items():
                read[t] = max(read.get(t, 0.0), accuracy)
            reading = f"{len(values)} rounds' {got[0].kind}, each row's largest entry, the round read best"
            attacks.append(Score("label reading", name, "alice", reading, "accuracy", max(mine.values()), majority,
                                 secret=LABELS))  # fmt: skip
        # learned: [its columns, every round's values side by side] and the round-aware [round 1, the later rounds'
        # sum] (the sum averages the later rounds' noise out), from k known labels
        views = {"label inference": values, "label inference (rounds summed)": values[:1] + [sum(values[1:])]}
        views = views if values else {}
        stacked = {a: np.hstack(parts) for a, parts in views.items() if a == "label inference" or len(values) >= 3}
        for k in run.sweep:
            for attack, rows in stacked.items():
                score, alone, base = infer_labels(rows, y_train, classes, k, run.seed, own=own)
                held = f"its columns, {len(values)} rounds' {got[0].kind}, {k} known labels"
                attacks.append(Score(attack, name, "alice", held, metric, score, base, own=alone, known=k,
                                     secret=LABELS))  # fmt: skip
        sent = [s for s in run.received(name, (FittedValues,), "out") if "test" in s.values and "train" in s.values]
        view = data.views[m].splits
        outputs = {s: np.hstack([f.values[s].numpy().reshape(len(f.values[s]), -1) for f in sent])
                   for s in ("train", "test")} if sent else {}  # fmt: skip
        for k in run.sweep if sent else ():
            score, alone, base = complete_model(view["train"], outputs["train"], y_train, view["test"],
                                                outputs["test"], y_test, classes, k, run.seed)  # fmt: skip
            held = f"its columns, its {len(sent)} round models' outputs on new people, {k} known labels"
            beside = {"alice_model": run.main_task["value"]}
            attacks.append(Score("model completion", name, "alice", held, metric, score, base, beside, own=alone,
                                 known=k, secret=LABELS))  # fmt: skip
    replies = [r for r in run.received(COORDINATOR, (FittedValues,)) if "train" in r.values]
    for m, name in enumerate(names[1:], start=1):
        mine = [r.values["train"].numpy() for r in replies if r.sender == name]
        outputs = np.hstack([v.reshape(len(v), -1) for v in mine]) if mine else None
        for k in run.sweep if mine else ():
            score, alone, base = infer_features(outputs, data.views[m].splits["train"], k, run.seed,
                                                own=data.views[0].splits["train"])  # fmt: skip
            held = f"its columns, {name}'s fitted values of {len(mine)} rounds, {k} known rows of its columns"
            attacks.append(Score("feature inference", "alice", name, held, "mae", score, base, own=alone, known=k))
    out = {"attacks": attacks, "budget": [b for b in (budget(run), output_noise(run)) if b is not None]}
    out["not_attacked"] = [NOT_ATTACKED[run.method]] if run.method in NOT_ATTACKED else []
    if read:
        out["label_attack_accuracy"] = max(read.values())
        out["label_majority_rate"] = majority
        out["label_attack_accuracy_by_round"] = {str(t): read[t] for t in sorted(read)}
    if run.method == "interm":
        attacks += gradient_attacks(run) if not run.sampled else []
        if run.sampled:
            out["not_attacked"].append("Interm's per-row gradients: the audit replays the minibatch schedule over "
                                       "every row, and the holders kept a sample (run.keep_rows)")  # fmt: skip
    recovery = None if run.sampled else residual_recovery(run)
    if run.sampled and broadcast_mechanism(run.config, len(names)) is not None:
        out["not_attacked"].append("residual recovery: it redraws the noise of every row, and the holders kept a "
                                   "sample of the rows (run.keep_rows); rerun with run.keep_rows 0")  # fmt: skip
    if recovery is not None:
        attacks.append(recovery[0])
        out.update(recovery[1])
    return out


def interm_gradients(run: KeptRun, name: str, rows: int) -> list[np.ndarray]:
    """Each training row's gradients as organization ``name`` got them in Interm fusion (Alice's error of its hidden
    representation), one block of columns an epoch (:func:`vcl.audit.attacks.per_row_gradients`): the minibatch
    schedule replayed from the run seed every organization holds, as the organization draws it."""
    generator = torch.Generator().manual_seed(run.seed)
    batches: list = []

    def place(step):
        nonlocal batches
        if step.args["batch"] == 0:
            batches = minibatches(rows, step.args["batch_size"], generator)
        return "interm", step.args["epoch"], batches[step.args["batch"]].numpy(), rows

    return per_row_gradients(run.messages(name), place).get("interm", [])


def gradient_attacks(run: KeptRun) -> list[Score]:
    """Split learning's label attacks (:func:`vcl.audit.attacks.gradient_label_attacks`) on each organization's
    per-row gradients, beside its own columns."""
    data = run.data()
    y = data.labels["train"].numpy()
    out = []
    for m, name in enumerate(run.names[1:], start=1):
        epochs = interm_gradients(run, name, len(y))
        if epochs:
            out += gradient_label_attacks(name, "alice", epochs, y, data.task == "classification",
                                          data.views[m].splits["train"], run.sweep, run.seed)  # fmt: skip
    return out


def residual_recovery(run: KeptRun) -> tuple[Score, dict] | None:
    """What the first organization besides Alice recovers of the clean residual (kept by Alice as her ``own``) from
    the perturbed one it received: the values as they came, the best of those and of redrawing the noise from every
    seed it could derive from what it holds (each whole number of its config, alone, per round, per round and
    organization, and with the tag Alice's noise uses), and the same estimate from draws it cannot know (Alice's
    secret, in her checkpoint, with another tag). With Alice's secret none of the seeds is hers: the attack does no
    better than the values as they came (Laplace) or than the blind estimate (interval privacy)."""
    mechanism = broadcast_mechanism(run.config, len(run.names))
    clean = {m.round: m.values for m in run.received(COORDINATOR, (PseudoResidual,), "own")}
    if mechanism is None or len(run.names) < 2 or not clean:
        return None
    known = config_integers(party_copy(run.config.to_dict()))  # all a receiver's copy of the config holds
    secret = int(run.checkpoint()["protocol"]["federation"]["noise_secret"])
    received, best, blind = [], [], []
    for msg in run.received(run.names[1], (PseudoResidual,)):
        truth, public = clean[msg.round], msg.values

        def attacked(seed: int, truth=truth, public=public) -> float:
            guess = mechanism.attack(public, truth, torch.Generator().manual_seed(seed))
            return float((guess - truth).abs().mean())

        received.append(float((public - truth).abs().mean()))
        seeds = candidate_seeds(known, msg.round, len(run.names))
        best.append(min([received[-1], *(attacked(s) for s in seeds)]))
        blind.append(attacked(seed_for(secret, msg.round, BLIND)))
    figures = {
        "residual_received_mae": float(np.mean(received)),
        "residual_attack_mae": float(np.mean(best)),
        "residual_blind_mae": float(np.mean(blind)),
    }
    held = "the perturbed residual of every round, every seed its copy of the config holds"
    base = min(figures["residual_received_mae"], figures["residual_blind_mae"])
    score = Score("residual recovery", run.names[1], "alice", held, "mae", figures["residual_attack_mae"], base,
                  {"received": figures["residual_received_mae"], "blind": figures["residual_blind_mae"]},
                  secret="residuals")  # fmt: skip
    return score, figures


def candidate_seeds(known: tuple[int, ...], round_: int, parties: int) -> list[int]:
    seeds = []
    for s in known:
        seeds += [s, seed_for(s, round_), seed_for(s, round_, NOISE), seed_for(s, NOISE)]
        seeds += [seed_for(s, round_, m) for m in range(parties)]
    return list(dict.fromkeys(seeds))


def budget(run: KeptRun) -> dict:
    """What Alice's noise guarantees over the run, composed by the accountant (docs/privacy.md, "Budgets"):
    ``dp`` one release of each label, ``dp_residuals`` one Laplace release per distinct broadcast; ``residual_laplace``
    none (one person's label moves every row's residual, and the clipping bounds are the data's)."""
    g = run.config.gal
    if run.method == "late" and g.privacy != "dp":
        return no_budget("the labels themselves are sent to every organization", "labels (Late fusion)")
    if g.privacy == "none":
        return no_budget("no noise on the labels or the residuals (gal.privacy none)", "none")
    if g.privacy == "dp":
        if len(run.names) < 2:
            return no_budget("no organization but Alice: nothing left her, and her labels were not privatized", "none")
        data = run.data()
        classes = data.num_classes if data.task == "classification" else None
        how = "randomized response" if classes else f"Laplace on the target clipped to {list(g.label_bounds)}"
        return label_budget(g.privacy_epsilon, classes, what=f"{how} on the labels, once")
    if g.privacy == "dp_residuals":
        sent = [m for _, d, m in run.messages(COORDINATOR) if d == "out" and isinstance(m, PseudoResidual)]
        releases = len({(m.round, hashlib.sha256(m.values.numpy().tobytes()).hexdigest()) for m in sent})
        if not releases:
            return no_budget("no residual left Alice", "none")
        multiplier = broadcast_mechanism(run.config, len(run.names)).noise_multiplier  # the run's own calibration
        return laplace_budget(multiplier, releases, what="Laplace on the residuals bounded in [-1, 1], each round",
                              neighbours="one person's label (Alice's training rows)")  # fmt: skip
    if g.privacy == "ip":
        return no_budget(
            "interval privacy is not differential privacy: a value at one clipping bound yields outputs a value at "
            "the other never does; it hides where in [a, b] a value lies to within the interval its random "
            "threshold leaves (residual recovery scores what that hides)",
            "interval privacy",
        )
    return no_budget(
        "one person's label moves every row's residual (F⁰ is the label prior; η and the weights "
        "read the labels) and the clipping bounds are the residual's own quantiles, so no noise scale bounds one "
        "person's influence; gal.privacy dp is the guaranteed mode",
        f"Laplace on the clipped residuals, alpha {g.privacy_alpha:g}"
        + (", one draw repeated" if g.privacy_draws == "repeated" else ""),
    )


def output_noise(run: KeptRun) -> dict | None:
    """The noisy organizations' Gaussian noise on their outputs (``gal.noisy_organizations``), if any."""
    g = run.config.gal
    if g.noise_sigma <= 0 or not g.noisy_organizations or run.method in ("alone", "interm"):
        return None
    return no_budget(
        "no DP: the organizations' outputs are not clipped, so no noise scale bounds one person's influence on them",
        f"Gaussian noise sigma {g.noise_sigma:g} on the noisy organizations' outputs",
    )
