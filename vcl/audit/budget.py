"""A noise's privacy budget over a whole run, composed by Google's ``dp-accounting`` (never by hand).

A method states what one release of one person's values costs — the Laplace mechanism's *noise multiplier*, its
scale over the L1 sensitivity of that person's values — and how many times each person's values are released in the
run; the privacy-loss-distribution accountant composes those releases and gives ε at the run's δ. A mechanism that
is not differential privacy (interval privacy, a repeated draw, an offset per feature) gets no ε: the budget says why
instead, so that no figure suggests a guarantee there is not.
"""

from __future__ import annotations

import math

import dp_accounting
from dp_accounting.pld import PLDAccountant

DELTA = 1e-5  # the δ a run's ε is given at


def laplace_budget(noise_multiplier: float, releases: int, delta: float = DELTA, what: str = "") -> dict:
    """ε at ``delta`` after ``releases`` adaptive releases of one person's values, each by the Laplace mechanism with
    ``noise_multiplier`` (scale / L1 sensitivity): the PLD accountant of ``dp-accounting``."""
    if noise_multiplier <= 0 or not math.isfinite(noise_multiplier):
        return no_budget("no noise", what)
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(noise_multiplier), int(releases))
    accountant = PLDAccountant()
    accountant.compose(event)
    return {
        "private": True,
        "mechanism": what,
        "epsilon": float(accountant.get_epsilon(delta)),
        "delta": delta,
        "releases": int(releases),
        "noise_multiplier": float(noise_multiplier),
        "accountant": "dp-accounting PLDAccountant, Laplace events self-composed",
    }


def no_budget(why: str, what: str = "") -> dict:
    """A noise (or none) that carries no differential-privacy guarantee, and why."""
    return {"private": False, "mechanism": what, "epsilon": math.inf, "delta": None, "why": why}
