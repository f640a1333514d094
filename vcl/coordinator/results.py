"""What ``results.json`` reports, taken from the models a run keeps: docs/design.md ("What results.json
reports")."""

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
    """{split: metric} of a fresh prediction from the kept models using rounds 1..``round_``, and the round it used;
    ``kept``: the metrics by round that :func:`kept_records` already computed (not asked for again)."""
    if not protocol.keeps_models:  # MPDL and FTL: the last round's outputs on the test and A-only rows
        return protocol.evaluate(), protocol.round
    if kept is not None and round_ in kept:
        return kept[round_], round_
    return protocol.prediction_stage(round_)
