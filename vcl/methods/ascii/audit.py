"""What ASCII's receivers can infer from what they kept (docs/privacy.md): the labels are sent by design (checked,
not attacked); label inference from the scores and feature inference are. No noise, so no budget."""

from __future__ import annotations

import numpy as np

from vcl.audit.attacks import LABELS, Score, infer_features, infer_labels
from vcl.audit.budget import no_budget
from vcl.audit.run import COORDINATOR, KeptRun
from vcl.messages import Labels
from vcl.methods.ascii.messages import ClassVotes, IgnoranceScores


def one_hot(classes: np.ndarray, k: int) -> np.ndarray:
    return np.eye(k)[np.clip(classes.astype(np.int64), 0, k - 1)]


def audit(run: KeptRun) -> dict:
    data, names = run.data(), run.names
    y_train, k = data.labels["train"].numpy().astype(np.int64), data.num_classes
    majority = float(np.bincount(y_train).max() / len(y_train))
    attacks: list[Score] = []
    for name in names[1:]:
        own = data.views[names.index(name)].splits["train"]
        sent = run.received(name, (Labels,))
        if sent:
            got = sent[0].values.numpy().reshape(-1).astype(np.int64)
            attacks.append(Score("label reading", name, "alice", "the labels it is sent", "accuracy",
                                 float((got == y_train).mean()), majority, secret=LABELS))  # fmt: skip
        scores = run.received(name, (IgnoranceScores,))
        rows = np.stack([s.scores.numpy().reshape(-1) for s in scores], 1) * len(y_train) if scores else None
        for known in run.sweep if scores else ():
            held = f"its columns, the ignorance scores of {len(scores)} hops, {known} known labels"
            score, alone, base = infer_labels(rows, y_train, True, known, run.seed, own=own)
            attacks.append(Score("label inference", name, "alice", held, "accuracy", score, base, own=alone,
                                 known=known, secret=LABELS))  # fmt: skip
        for sender in sorted({s.sender for s in scores} - {name}):
            if sender not in names:
                continue
            rows = np.stack([s.scores.numpy().reshape(-1) for s in scores if s.sender == sender], 1)
            target = data.views[names.index(sender)].splits["train"]
            for known in run.sweep:
                score, alone, base = infer_features(rows * len(y_train), target, known, run.seed, own=own)
                held = f"its columns, the ignorance scores {sender} sent it, {known} known rows of {sender}'s columns"
                attacks.append(Score("feature inference", name, sender, held, "mae", score, base, own=alone,
                                     known=known))  # fmt: skip
    votes = [v for v in run.received(COORDINATOR, (ClassVotes,)) if "train" in v.classes]
    for m, name in enumerate(names[1:], start=1):
        mine = [one_hot(v.classes["train"].numpy(), k) for v in votes if v.sender == name]
        votes_of = np.hstack(mine) if mine else None
        for known in run.sweep if mine else ():
            score, alone, base = infer_features(votes_of, data.views[m].splits["train"], known, run.seed,
                                                own=data.views[0].splits["train"])  # fmt: skip
            held = f"its columns, {name}'s predicted classes of {len(mine)} rounds, {known} known rows of its columns"
            attacks.append(Score("feature inference", "alice", name, held, "mae", score, base, own=alone,
                                 known=known))  # fmt: skip
    return {
        "attacks": attacks,
        "budget": [no_budget("ASCII adds no noise; every agent is sent the labels", "none")],
        "not_attacked": ["model completion: every agent holds the training labels it was sent"],
    }
