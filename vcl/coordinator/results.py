"""What ``results.json`` reports, taken from the models a run keeps.

- GAL (and Alone, Joint, AL) and Late fusion: the per-round metrics, and so ``value`` and
  ``best_value``, are recomputed at the end of the run through the prediction stage (each organization
  answers a prediction request with its kept models' outputs, Alice assembles them; round t uses the
  models of rounds 1..t). Without Deep Model Sharing this equals Alice's running F (tested). With it,
  round t retrains the extractor the earlier rounds' heads share, so the kept models give other
  figures than the outputs sent during the run; those stay beside them as ``round_time_metrics`` (and
  ``round_time_auroc``).
- A binary task's AUROC (``auroc`` in each round's record and in results.json) follows the same path as the
  metric: the kept models' where the protocol recomputes its rounds, Alice's running F elsewhere.
- Interm fusion: F is its kept model's prediction. ASCII and DC analysis: the figures of the round;
  tests hold them equal to a fresh prediction from the kept models. MPDL and FTL report their last round's
  outputs on the test and A-only rows (MPDL keeps that round's central model M_D for ``train.py predict``, which
  gives the same scores, tested; FTL keeps no model).

``prediction_stage`` is the metric on every split of a fresh prediction from the kept models, through
each protocol's own prediction path, at the round the run reports (``prediction_stage_round``).
"""

from __future__ import annotations

from vcl.protocol import Protocol


def kept_records(protocol: Protocol, records: list[dict]) -> tuple[list[dict], dict[int, dict] | None]:
    """The run's per-round records with the metrics (and a binary task's AUROC) of the kept models (a copy when they
    differ), and those metrics by round (``None`` where the protocol reports Alice's running F)."""
    kept = protocol.kept_round_metrics()
    if kept is None:
        return records, None
    shares = protocol.shares_models  # a later round retrained what they share: keep what Alice saw beside them
    recs = []
    for r in records:
        k = kept[r["round"]]
        rec = {**r, "metrics": k["metrics"], **({"auroc": k["auroc"]} if k["auroc"] else {})}
        if shares:  # what Alice saw during the run
            rec.update(round_time_metrics=r["metrics"], **({"round_time_auroc": r["auroc"]} if "auroc" in r else {}))
        recs.append(rec)
    return recs, {t: k["metrics"] for t, k in kept.items()}


def prediction_stage(protocol: Protocol, round_: int, kept: dict[int, dict] | None = None) -> tuple[dict, int]:
    """{split: metric} of a fresh prediction from the kept models using rounds 1..``round_``, and the round
    it used (the last one where the protocol cannot stop its prediction earlier). ``kept``: the metrics by
    round that :func:`kept_records` already computed through the prediction stage (not asked for again)."""
    if not protocol.keeps_models:  # MPDL and FTL: the last round's outputs on the test and A-only rows
        return protocol.evaluate(), protocol.round
    if kept is not None and round_ in kept:
        return kept[round_], round_
    return protocol.prediction_stage(round_)
