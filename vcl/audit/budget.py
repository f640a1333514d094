"""A noise's privacy budget over a whole run, composed by Google's ``dp-accounting`` (never by hand); a mechanism
that is not differential privacy gets no ε and a sentence saying why (docs/privacy.md, "Budgets")."""

from __future__ import annotations

import math

import dp_accounting
from dp_accounting.mechanism_calibration import ExplicitBracketInterval
from dp_accounting.pld import PLDAccountant

DELTA = 1e-5  # the δ a run's ε is given at


def laplace_budget(
    noise_multiplier: float, releases: int, delta: float = DELTA, what: str = "", neighbours: str = ""
) -> dict:
    """ε at ``delta`` after ``releases`` adaptive releases of one person's values, each by the Laplace mechanism with
    ``noise_multiplier`` (scale / L1 sensitivity): the PLD accountant of ``dp-accounting``. ``neighbours``: the data
    sets the guarantee is for (whose one person's what differs)."""
    if noise_multiplier <= 0 or not math.isfinite(noise_multiplier):
        return no_budget("no noise", what)
    event = dp_accounting.LaplaceDpEvent(noise_multiplier)
    return {**accounted(event, releases, delta, what, neighbours), "noise_multiplier": float(noise_multiplier)}


def laplace_multiplier(epsilon: float, releases: int, delta: float = DELTA) -> float:
    """The Laplace noise multiplier whose ``releases`` self-composed releases cost ``epsilon`` at ``delta`` (the PLD
    accountant's, on a coarser grid than the report's): what ``gal.privacy: dp_residuals`` adds each round."""

    def event(multiplier: float):
        return dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(multiplier), int(releases))

    def coarse() -> PLDAccountant:
        return PLDAccountant(value_discretization_interval=1e-3)

    bracket = ExplicitBracketInterval(0.99 / epsilon, 1.05 * releases / epsilon)
    return float(dp_accounting.calibrate_dp_mechanism(coarse, event, epsilon, delta, bracket, tol=1e-4))


def label_budget(epsilon: float, classes: int | None, delta: float = DELTA, what: str = "") -> dict:
    """The (ε, δ) of :class:`vcl.engine.privacy.LabelPrivacy` (one release of each label): randomized response over
    ``classes`` buckets, keeping the label with probability e^ε / (e^ε + K − 1) (dp-accounting's noise parameter p is
    the chance of a uniform draw over all K, so p = K / (e^ε + K − 1)); regression (``classes`` None): Laplace with
    noise multiplier 1/ε (scale (high − low)/ε over the sensitivity high − low of one clipped target)."""
    neighbours = "one person's label (Alice's training and validation rows)"
    if classes is not None:  # dp-accounting's randomized response is stated for one value replaced by another
        event = dp_accounting.RandomizedResponseDpEvent(classes / (math.exp(epsilon) + classes - 1), classes)
        return accounted(event, 1, delta, what, neighbours, dp_accounting.NeighboringRelation.REPLACE_ONE)
    # Laplace: its noise multiplier is the scale over the change one replaced label makes (the accountant's own
    # relation, add-or-remove, only names whose change that is)
    return accounted(dp_accounting.LaplaceDpEvent(1.0 / epsilon), 1, delta, what, neighbours)


def accounted(event, releases: int, delta: float, what: str, neighbours: str, relation=None) -> dict:
    """``event`` self-composed ``releases`` times by the PLD accountant (``relation``: its neighbouring relation,
    dp-accounting's default add-or-remove-one if None): ε at ``delta``."""
    accountant = PLDAccountant() if relation is None else PLDAccountant(neighboring_relation=relation)
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, int(releases)))
    return {
        "private": True,
        "mechanism": what,
        "epsilon": float(accountant.get_epsilon(delta)),
        "delta": delta,
        "releases": int(releases),
        "neighbours": neighbours,
        "accountant": f"dp-accounting PLDAccountant, {type(event).__name__} self-composed",
    }


def no_budget(why: str, what: str = "") -> dict:
    """A noise (or none) that carries no differential-privacy guarantee, and why."""
    return {"private": False, "mechanism": what, "why": why}  # no ε: only a guarantee prints one
