"""What DC's analyst can infer from what it kept (docs/privacy.md, "DC").

The master (the analyst, Alice's coordinator) receives each worker's dimensionality-reduced rows f_ij(X_ij), of its
training rows, the shared test rows and the shared anchor, and each row group's labels (sent to it by design). On
those it can try to rebuild a worker's columns:

- *feature inference* from the reduced training rows and 40 known rows of the worker's columns;
- *anchor inversion* with a colluding institution: every worker builds the same anchor (from the public rows and
  the run's seed), so a colluder hands it over; the master fits the worker's affine reduction by least squares on
  (anchor, reduced anchor) and maps the reduced rows back (exact up to the dimensions the reduction drops).

DC adds no noise, so it has no budget; its privacy is the reduction itself.
"""

from __future__ import annotations

from vcl.audit.attacks import Score, infer_features, invert_map
from vcl.audit.budget import no_budget
from vcl.audit.run import COORDINATOR, KeptRun
from vcl.messages import EXPERIMENTER
from vcl.methods.dc.messages import KeptModel, ReducedRepresentation


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
    return {
        "attacks": attacks,
        "budget": [no_budget("DC adds no noise: its protection is the dimensionality reduction", "none")],
        "not_attacked": [
            "labels: each row group's labels are sent to the analyst by design (Algorithm 1, step 4)",
            "AnchorShare between workers (dc.anchor tsvd or raw: a noisy low-rank or raw copy of the rows) is "
            "itself the rows; not attacked here",
        ],
    }
