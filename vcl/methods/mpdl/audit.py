"""What MPDL's receivers can infer from what they kept (docs/privacy.md): MPDL's own attacks
(:mod:`vcl.methods.mpdl.attacks`) run again on its experimenter's reports; h₀'s per-row ε composed over its passes."""

from __future__ import annotations

import torch

from vcl.audit.attacks import Score, gradient_label_attacks, per_row_gradients
from vcl.audit.budget import laplace_budget, no_budget
from vcl.audit.run import COORDINATOR, KeptRun
from vcl.engine.loop import minibatches, seed_for
from vcl.family import compare_methods, family_of
from vcl.messages import Labels, Step
from vcl.methods.experimenter import EXPERIMENTER
from vcl.methods.mpdl.messages import Report
from vcl.storage.checkpoints import PARTY_KEYS, load_checkpoint

OTHER = {"a": "b", "b": "a"}


def audit(run: KeptRun) -> dict:
    out = {"attacks": [], "budget": [budget(run)], "not_attacked": [
        "labels: party b sends the collaborator C its labels in the clear (the paper's C holds them)"]}  # fmt: skip
    reports = run.received(EXPERIMENTER, (Report,))
    if run.method != "mpdl" or not reports:
        out["not_attacked"].append(f"{run.method}: the FTL reference's codes are not attacked here")
        return out
    data = run.data()
    if run.sampled:  # its experimenter's attacks take each party's whole report, row for row
        out["not_attacked"].append("MPDL's own attacks: the holders kept a sample of the rows (run.keep_rows), and "
                                   "its experimenter scores whole reports; rerun with run.keep_rows 0")  # fmt: skip
        return out
    out["attacks"] += gradient_attacks(run)
    names = list(run.names) + [EXPERIMENTER]
    [experimenter] = family_of(run.config, run.method).parties(run.config, run.method, data, names.index(EXPERIMENTER))
    last = max(r.round for r in reports)
    for report in reports:
        if report.round == last:
            experimenter.handle(report)
    figures = experimenter.privacy_attack()
    for target in ("a", "b"):
        by, base = OTHER[target], figures[f"trivial_mae_{target}"]
        held = "its dual model, the generations and gradients it received, the other's perturbed means"
        attacks = [
            Score("feature reconstruction", by, target, held, "mae", figures[f"attack_mae_{target}"], base,
                  {"overlap_rows": figures[f"attack_mae_overlap_{target}"]}),
            Score("h0 inversion", by, target, "every h0 output of the target it could hold, its means", "mae",
                  figures[f"h0_attack_mae_{target}"], base),
            Score("noise redraw", by, target, "the h0 outputs, every seed its copy of the config holds", "mae",
                  figures[f"h0_redraw_mae_{target}"], figures[f"h0_blind_mae_{target}"]),
        ]  # fmt: skip
        out["attacks"] += attacks
    return out


def gradient_attacks(run: KeptRun) -> list[Score]:
    """Split learning's label attacks (:func:`vcl.audit.attacks.gradient_label_attacks`) by party a on C's errors δ
    of its activations while C fits its last M_C (on the co-occurring rows), beside a's own columns of those rows.
    Party a replays the fit's minibatch schedule from the run seed and knows which of its rows the set holds (from its
    own checkpoint and messages); the truth is b's labels of the set, as C got them."""
    truth, asked = {}, None
    for r, direction, m in run.messages(COORDINATOR):  # C's requests for a row set's labels, and b's answers
        if direction == "out" and isinstance(m, Step) and m.step == "labels":
            asked = (r, m.args["rows"])
        elif direction == "in" and isinstance(m, Labels) and asked is not None:
            truth[asked], asked = m.values.numpy().reshape(-1), None
    sets = {m.round: int(m.args["fold"]) for m in run.received("a", (Step,)) if m.step == "sets"}
    fits = [(r, rows) for r, rows in truth if rows in ("train", "all") and r in sets]
    path = run.folder("a").parent / f"round-{run.last}.ckpt"
    if not fits or not path.is_file():
        return []
    r, rows = max(fits, key=lambda fit: (fit[0], fit[1] == "all"))  # C's last M_C
    state = load_checkpoint(path, PARTY_KEYS)["state"]
    own = run.data().a.train.numpy()[state["rows"]]
    own = own if rows == "all" else own[state["fold"] != sets[r]]
    y, size, schedules = truth[(r, rows)], run.config.mpdl.batch_size, {}

    def place(step):  # a's schedule of each fit: drawn from seed_for(seed, round, which, 0xCE) at every epoch's start
        if step.round != r or step.args.get("rows") != rows or step.args.get("batch", -1) < 0:
            return None
        which, batch = step.args["which"], step.args["batch"]
        if which not in schedules:
            schedules[which] = [torch.Generator().manual_seed(seed_for(run.seed, r, which, 0xCE)), -1, []]
        mine = schedules[which]
        if batch == 0:
            mine[1:] = mine[1] + 1, minibatches(len(y), size, mine[0])
        return which, mine[1], mine[2][batch].numpy(), len(y)

    return [a for fit in per_row_gradients(run.messages("a"), place).values()
            for a in gradient_label_attacks("a", "b", fit, y, True, own, run.sweep, run.seed)]  # fmt: skip


def budget(run: KeptRun) -> dict:
    """h₀'s (ε, δ): with ``mpdl.dp_noise: per_row`` each row's normalized features get Laplace noise of scale d/ε
    against an L1 sensitivity of d (noise multiplier 1/ε) once a method run; a default run also runs the FTL reference
    on fresh draws unless both parties' secrets are set, so each row is released twice to an observer of both."""
    o = run.config.mpdl
    if o.epsilon == 0:
        return no_budget("mpdl.epsilon 0: h0 adds no noise", "h0")
    if o.dp_noise != "per_row":
        return no_budget("mpdl.dp_noise offset_no_dp: one offset per feature, which the receiver can subtract", "h0")
    what = f"h0 per-row Laplace, epsilon {o.epsilon:g} a release"
    data = run.data()
    if data.a.bounds is None or data.b.bounds is None:
        return no_budget(
            "no DP guarantee for the data set: h0 normalizes each feature by the party's own training minimum and "
            "maximum, which one row can move (and which are released unprotected); the per-row epsilon holds only "
            "where the features' range is public (images' pixels in [0, 1])",
            what,
        )
    again = "ftl" in compare_methods(run.config) and run.method == "mpdl" and not (o.secret_a and o.secret_b)
    what += " (mpdl and its ftl reference)" if again else ""
    neighbours = "one person's row of a party's features replaced, every feature clipped to the public range [0, 1]"
    return laplace_budget(1.0 / o.epsilon, 2 if again else 1, what=what, neighbours=neighbours)
