"""ASCII's messages: an agent's ignorance scores to the next, its class votes and interchange figures to Alice."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from vcl.messages import Message


# --- the messages of this protocol step (each declares its tensors once; see vcl.messages) ---
@dataclass(frozen=True)
class IgnoranceScores(Message):
    """ASCII, agent → next agent in the chain: the ignorance scores ``w`` (length N, sum one; eqs 10, 12) and, with
    ``ascii.alpha=paper`` only, the α's of the round's agents so far (the sender's included) and, past the second hop of
    a longer chain, ``round_start`` (the scores the round began from; docs/ascii.md)."""

    scores: Tensor = field(repr=False)
    alphas: Tensor = field(repr=False)
    round_start: Tensor | None = field(repr=False, default=None)

    tensors = {"scores": "scores", "alphas": "alphas", "round_start": "round_start"}


@dataclass(frozen=True)
class ClassVotes(Message):
    """ASCII, agent → Alice: predicted classes of its classifiers and their model weights α: after a round ``alphas``
    (1,) and ``classes`` {split: N}; in the prediction stage ``alphas`` (T,) and ``classes`` {round: N}. Alice forms
    the SAMME-coded vote ``Σ α g`` (Algorithm 1, line 12); no feature leaves the agent."""

    alphas: Tensor = field(repr=False)
    classes: dict[str, Tensor] = field(repr=False)

    tensors = {"alphas": "alphas", "*": "classes"}


@dataclass(frozen=True)
class Interchange(Message):
    """ASCII, Alice → agent: take your hop of round ``round`` (Algorithm 1, lines 3–10) on the ignorance scores
    the transport delivered to you, and pass yours on to ``next``. Public facts only, no tensor: the agent's
    place in the round's order (``position`` 0 starts it), whether ``next`` is in this round (False on the last hop)
    and knows its start scores, whether α is the paper's joint one (``ascii.alpha=paper``), and the model's seed."""

    position: int = 0
    next: str = ""
    next_in_round: bool = True
    next_knows_start: bool = True
    joint: bool = False
    seed: int = 0


@dataclass(frozen=True)
class Discarded(Message):
    """ASCII, agent → Alice: its model's α ≤ 0, so the model is discarded and passes nothing on (Algorithm 1,
    lines 5 and 8); ``alpha`` is the number itself. No tensor."""

    alpha: float = 0.0
