"""What DC's analyst can infer from what it kept: feature inference, anchor inversion, anchor share read.

DC adds no noise, so it has no budget. Each attack: docs/privacy.md ("The threat model")."""

from __future__ import annotations

from vcl.audit.attacks import Score, infer_features, invert_map, read_copy
from vcl.audit.budget import no_budget
from vcl.audit.run import COORDINATOR, KeptRun
from vcl.methods.dc.messages import AnchorShare, KeptModel, ReducedRepresentation
from vcl.methods.experimenter import EXPERIMENTER


def audit(run: KeptRun) -> dict:
    data = run.data()
    workers = [n for n in run.names if n != EXPERIMENTER]
    views = [v for row in data.parties for v in row]
    groups = len(data.column_groups)
    reps = [r for r in run.received(COORDINATOR, (ReducedRepresentation,)) if "anchor" in r.values]
    anchors = [m.anchor for m in run.received(EXPERIMENTER, (KeptModel,)) if m.anchor is not None]
    attacks: list[Score] = []
    for rep in reps:
        if rep.sender not in workers:
            continue
        w = workers.index(rep.sender)
        target = views[w].splits["train"]
        for known in run.sweep:  # the analyst holds no columns of its own: its own data alone is the trivial guess
            held = f"{rep.sender}'s reduced rows, {known} known rows of its columns"
            score, _, base = infer_features(rep.values["train"], target, known, run.seed)
            attacks.append(Score("feature inference", "the analyst", rep.sender, held, "mae", score, base, known=known))
        if anchors:
            anchor = anchors[0][:, data.column_groups[w % groups]]
            held = f"{rep.sender}'s reduced rows and reduced anchor, the anchor from a colluding institution"
            score, base = invert_map(anchor, rep.values["anchor"], rep.values["train"], target)
            attacks.append(Score("anchor inversion", "the analyst", rep.sender, held, "mae", score, base))
    places = [(i, j) for i, row in enumerate(data.parties) for j, _ in enumerate(row)]  # each worker's (i, j)
    for w, receiver in enumerate(workers):  # the anchor shares a worker got from the others
        for share in run.received(receiver, (AnchorShare,)):
            copy = share.values.get("approx", share.values.get("rows"))
            if copy is None or share.sender not in workers:  # DC(rand): column ranges, no row of anyone's
                continue
            target = views[workers.index(share.sender)].splits["train"]
            if len(copy) != len(target):
                continue
            kind = "its rank-k copy plus noise" if "approx" in share.values else "its rows"
            score, base = read_copy(copy, target)
            held = f"{share.sender}'s anchor share ({kind}), read as its rows, no known row"
            attacks.append(Score("anchor share read", receiver, share.sender, held, "mae", score, base))
            same_rows = places[w][0] == tuple(share.position)[0]  # its own columns are of the sender's people
            for known in run.sweep:
                own = views[w].splits["train"] if same_rows else None
                mine = "its columns (of the same people), " if same_rows else ""
                held = f"{mine}{share.sender}'s anchor share, {known} known rows of its columns"
                score, alone, base = infer_features(copy, target, known, run.seed, own=own)
                attacks.append(Score("feature inference", receiver, share.sender, held, "mae", score, base,
                                     own=alone, known=known))  # fmt: skip
    return {
        "attacks": attacks,
        "budget": [no_budget("DC adds no noise: its protection is the dimensionality reduction", "none")],
        "not_attacked": [
            "labels: each row group's labels are sent to the analyst by design (Algorithm 1, step 4)",
            "AnchorShare of dc.anchor rand: each column's range, no row of anyone's",
        ],
    }
