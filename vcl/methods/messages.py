"""The messages between Alice and the organizations of the organization-based families (GAL and its baselines,
ASCII): what she asks them to fit and to predict, and what they answer. Their families register them with the wire
format (:attr:`vcl.methods.columns.OrganizationFamily.messages`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from vcl.messages import Message, ValuesMessage


@dataclass(frozen=True)
class PseudoResidual(ValuesMessage):
    """Alice → organization: the pseudo-residual ``r^t`` on the training rows (N × K)."""

    tensors = {"train": "values"}


@dataclass(frozen=True)
class PredictionRequest(Message):
    """Alice → organization: predict the rows of ``split`` (the organization's own) with every round model; ``rows``:
    only those rows of it, by position (a prediction service's batch of IDs, :mod:`vcl.use.serve`)."""

    split: str = "test"
    rows: Tensor | None = field(default=None, repr=False)

    tensors = {"rows": "rows"}


@dataclass(frozen=True)
class FittedValues(Message):
    """Organization → Alice: model outputs on its rows ({split: N × K}, or {round: N × K} for a prediction);
    ``seconds``: for a fit, the organization's own wall seconds from the message to its outputs (GAL's Table 14)."""

    values: dict[str, Tensor] = field(repr=False)
    seconds: float = 0.0

    tensors = {"*": "values"}


@dataclass(frozen=True)
class ModelsRequest(Message):
    """Alice → organization: describe the models you keep for the prediction stage (for the run's report)."""


@dataclass(frozen=True)
class ModelsReport(Message):
    """Organization → Alice: how many models it keeps, their torch parameters (a shared extractor counted
    once), and whether its rounds share one extractor (Deep Model Sharing). Counts, no tensor."""

    models: int = 0
    parameters: int = 0
    shared: bool = False


@dataclass(frozen=True)
class Scalars(ValuesMessage):
    """A few numbers as a tensor: an organization's gradient norms, or the whole network's norm it clips by
    (Interm fusion's clip over every part of one network)."""

    tensors = {"values": "values"}


ORGANIZATION_MESSAGES = (PseudoResidual, PredictionRequest, FittedValues, ModelsRequest, ModelsReport, Scalars)
