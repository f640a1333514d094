"""Alice's side of the organization-based families (GAL and its baselines, ASCII): the organizations' fan-out
(:class:`OrganizationFederation`) and Algorithm 1's prediction stage, ``F = F⁰ + Σ_t Σ_m c_m^t f_m^t(x_m)``
(:class:`AssistedProtocol`)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from vcl.config import RunConfig
from vcl.config.resolve import resolve_device
from vcl.coordinator.federation import Federation
from vcl.datamodules.tabular import VerticalData
from vcl.engine.tasks import Task
from vcl.messages import Labels
from vcl.methods.columns import PartyPlan, make_task, plan_parties
from vcl.methods.messages import FittedValues, ModelsRequest, PredictionRequest, PseudoResidual
from vcl.protocol import Protocol


class OrganizationFederation(Federation):
    """The federation of organizations that fit what Alice sends them and keep their round models."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.absent: list[int] = []  # the participants of the last fit that did not answer (run.missing_parties)
        self.fit_seconds: dict[int, float] = {}  # each participant of the last fit: its own seconds (FittedValues)
        self.fitted: dict[str, int] = {}  # each organization's last round whose fit it answered

    def can_rejoin(self, name: str) -> bool:
        """An organization left out comes back when its own files keep every model it fitted (its last saved round
        is at or after its last fit), or it never fitted one."""
        if name not in self.saved:
            return name not in self.fitted
        return self.saved[name] >= self.fitted.get(name, -1)

    def since(self, name: str) -> str:
        return f"its fit of round {self.fitted[name]}"

    def state_dict(self) -> dict:
        return {**super().state_dict(), "fitted": dict(self.fitted)}

    def _keep_rounds(self, state: dict) -> None:
        super()._keep_rounds(state)
        self.fitted = {n: int(r) for n, r in state.get("fitted", {}).items()}

    def send_fits(
        self, round_: int, values: dict[int, Tensor], device, labels: bool = False, loss: str | None = None
    ) -> dict[str, Tensor]:
        """Send each participant ``m`` its ``values[m]`` to fit (as labels with ``loss``, or as a pseudo-residual);
        the outputs of those that answered (a party left out answers None: :attr:`absent` lists it) stacked in the
        order of ``values``: {split: (participants, N, K)}."""
        requests = []
        for m, v in values.items():
            name = self.names[m]
            fit = Labels(self.alice, name, round_, v, loss=loss) if labels else None
            requests.append((name, fit or PseudoResidual(self.alice, name, round_, v)))
        replies = self.request_all(requests)
        self.absent = [m for m, reply in zip(values, replies, strict=True) if reply is None]
        self.fit_seconds = {m: fit_seconds(r) for m, r in zip(values, replies, strict=True) if r is not None}
        self.fitted.update({self.names[m]: round_ for m, r in zip(values, replies, strict=True) if r is not None})
        present = [r for r in replies if r is not None]
        return stack_replies(present, device) if present else {}

    def predictions(self, split: str, round_: int, rows: Tensor | None = None) -> list[dict[str, Tensor] | None]:
        """Prediction stage: each organization's {round: outputs} on its rows of ``split`` (``rows``: those of them,
        by position; None: left out)."""
        replies = self.request_all((n, PredictionRequest(self.alice, n, round_, split, rows)) for n in self.names)
        return [None if r is None else r.values for r in replies]

    def models(self, round_: int) -> list:
        """The :class:`vcl.messages.ModelsReport` of each organization present (what it keeps for the prediction
        stage)."""
        replies = self.request_all((n, ModelsRequest(self.alice, n, round_)) for n in self.names)
        return [r for r in replies if r is not None]


class AssistedProtocol(Protocol):
    """A protocol whose organizations keep a model per round, and whose prediction adds their outputs up with the
    coefficients each round's record keeps (GAL, Alone, Joint, AL, Late fusion)."""

    starts_from_prior = True  # F = F⁰ + Σ_t Σ_m c_m^t f_m^t; Late fusion has no F⁰ term
    predicts_upto = True
    progress_header = "eta"
    federation: OrganizationFederation

    def progress_value(self, record: dict) -> str:
        """The round's assisted learning rate η (AL's chained steps: the last of them)."""
        eta = record.get("eta")
        return "" if eta is None else (f"{eta:.4g}" if not isinstance(eta, list) else f"{eta[-1]:.4g}…")

    def predict(
        self, split: str, rows: Tensor | None = None, upto: int | None = None, without: tuple[int, ...] = ()
    ) -> Tensor:
        """Algorithm 1's prediction stage (the module's ``F``) on rows of ``split`` that every organization holds, with
        the coefficients kept in each round's record. ``rows``: only those rows, by position (:mod:`vcl.use.serve`);
        ``upto``: the models of rounds 1..upto only (default: every round); ``without``: the organizations (by place)
        left out, as if they were down."""
        rounds = self.round_predictions(split, without, rows)
        return rounds[max(r for r in rounds if upto is None or r <= upto)]

    def round_predictions(
        self, split: str, without: tuple[int, ...] = (), rows: Tensor | None = None
    ) -> dict[int, Tensor]:
        """{round t: F after rounds 1..t} from one prediction request to every organization (but ``without``)."""
        outputs = self.federation.predictions(split, self.round, rows)  # None for an organization left out
        outputs = [None if m in without else o for m, o in enumerate(outputs)]
        device = self.device
        first = next((v for o in outputs if o is not None for v in o.values()), None)
        n = first.shape[0] if first is not None else len(rows) if rows is not None else self.rows(split)
        prior = self.prior.to(device).expand(n, -1).clone()
        F = prior if self.starts_from_prior else torch.zeros_like(prior)
        out = {0: prior}  # round 0 is F⁰ for every protocol (what the runner records before round 1)
        for record in self.history:
            if record["round"] == 0:
                continue
            for m, c in enumerate(record.get("coefficients", [])):
                if c and outputs[m] is not None:
                    F = F + c * outputs[m][str(record["round"])].to(device)
            out[record["round"]] = F
        return out

    def kept_round_metrics(self) -> dict[int, dict]:
        """{round t: {"metrics": ..., "auroc": ...}} of :meth:`predict` with rounds 1..t, one request per split
        (``auroc`` empty unless the task is binary)."""
        per_split = {s: self.round_predictions(s) for s in self.labels}
        rounds = sorted(next(iter(per_split.values())))
        return {
            t: {
                "metrics": {s: self.task.metric(per_split[s][t], y) for s, y in self.labels.items()},
                "auroc": self.auroc({s: per_split[s][t] for s in self.labels}),
            }
            for t in rounds
        }


def organizations(
    config: RunConfig, method: str, data: VerticalData, family, federation=None, **kwargs
) -> tuple[Task, PartyPlan, dict[str, Tensor], OrganizationFederation]:
    """What an organization-based family's coordinator starts from: its task, its plan (every setting checked before
    a party is built; ``family.column_options``: what the family decides of its organizations), Alice's labels on her
    device, and its federation (``federation``: the family's :class:`OrganizationFederation` class, with ``kwargs``)
    over the transport to the parties that ``family.parties(config, method, data, plan=plan)`` builds."""
    options = family.column_options(config)
    task = make_task(config, data, options)
    plan = plan_parties(config, method, data, options)
    labels = {s: y.to(resolve_device(config.run.device)) for s, y in data.labels.items()}
    names = [v.name for v in plan.views]
    build = lambda: family.parties(config, method, data, plan=plan)  # noqa: E731
    fed = (federation or OrganizationFederation).open(config, family, method, data, names, build, **kwargs)
    return task, plan, labels, fed


def fit_seconds(reply) -> float:
    """The seconds a fit's reply says its organization spent (NaN for anything but a finite number ≥ 0)."""
    seconds = getattr(reply, "seconds", None)
    ok = isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and math.isfinite(seconds)
    return float(seconds) if ok and seconds >= 0 else float("nan")


def stack_replies(replies: list[FittedValues], device=None) -> dict[str, Tensor]:
    """{split: (M, N, K)} on ``device`` (Alice's) from the organizations' replies, in the order given."""
    return {split: _stacked([r.values[split].to(device) for r in replies]) for split in replies[0].values}


def _stacked(parts: list[Tensor]) -> Tensor:
    """``torch.stack(parts)``; without copying when the parts already lie one after another in one block of memory
    (the outputs of organizations fitted together, :func:`vcl.engine.concurrent.fit_jobs`): a view of that block."""
    first = parts[0]
    if len(parts) > 1 and first.is_contiguous():
        storage, offset, size = first.untyped_storage().data_ptr(), first.storage_offset(), first.numel()
        if all(
            p.untyped_storage().data_ptr() == storage
            and p.storage_offset() == offset + m * size
            and p.shape == first.shape
            and p.dtype == first.dtype
            and p.device == first.device
            and p.is_contiguous()
            for m, p in enumerate(parts)
        ):
            return first.as_strided((len(parts), *first.shape), (size, *first.stride()), offset)
    return torch.stack(parts)
