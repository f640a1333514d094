"""What the organization-based families (GAL and its baselines, ASCII) share: each organization holds a column view
of the same rows; its learner, local loss, device and settings come from the config; Alice holds the labels.
:func:`build_parties` makes the parties, :func:`organizations_datamodule` their data module."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vcl.config import RunConfig
from vcl.config.resolve import per_organization, resolve_device, shared_data_options
from vcl.datamodules.image import ImageDataModule
from vcl.datamodules.sequence import SequenceDataModule
from vcl.datamodules.tabular import FeatureView, TabularDataModule, VerticalData
from vcl.datamodules.user import build_datamodule
from vcl.engine.loop import seed_for
from vcl.engine.tasks import Task
from vcl.errors import VCLInputError
from vcl.family import Family
from vcl.methods.messages import ORGANIZATION_MESSAGES
from vcl.models import LearnerSettings, deep_arch
from vcl.registry import DATASETS

REGRESSION_L1_DATASETS = ("diabetes", "boston")


@dataclass(frozen=True)
class ColumnOptions:
    """What a column-view family decides of its organizations beyond the common option groups (GAL: from its ``gal``
    group): Alice's task loss, each organization's local loss, which organizations have noise features
    (``noninformative``) or noisy outputs (``noisy``), baseline epochs, Deep Model Sharing; defaults decide nothing."""

    task_loss: str = "auto"
    local_loss: tuple = ("auto",)
    noninformative: tuple = ()
    noisy: tuple = ()
    noise_sigma: float = 0.0
    baseline_epochs: int = 0
    dms: bool = False


NO_OPTIONS = ColumnOptions()


def make_task(config: RunConfig, data: VerticalData, options: ColumnOptions = NO_OPTIONS) -> Task:
    loss = options.task_loss
    if loss == "auto":
        loss = "ce" if data.task == "classification" else "l1"
    return Task(data.task, data.num_classes, loss)


HALF = 0x4A1F  # the purpose tag of the draw of the random half: seed_for(run seed, HALF)


def organization_set(values: list, count: int, key: str, seed: int = 0) -> set[int]:
    """Indices from a config list (GAL Tables 6 and 17–21): ``half`` = a random half of the M organizations,
    M − M//2 of them drawn from the run seed as the paper's "randomly chosen half" (Alice among the candidates);
    ``last_half`` = M//2 .. M−1, the half the GAL authors' code fixes."""
    out: set[int] = set()
    size = count - count // 2 if count > 1 else 0
    for v in values:
        if v == "half":
            order = torch.randperm(count, generator=torch.Generator().manual_seed(seed_for(seed, HALF)))
            out |= set(order[:size].tolist())
        elif v == "last_half":
            out |= set(range(count - size, count))
        elif v >= count:
            raise VCLInputError(f"{key} lists organization {v}, but there are {count}; use 0..{count - 1}.")
        else:
            out.add(int(v))
    return out


def noninformative(view: FeatureView, seed: int) -> FeatureView:
    """The same organization with inputs replaced by N(0, 1) noise: no predictive power (GAL Tables 19–21)."""
    gen = torch.Generator().manual_seed(seed)
    noise = {s: torch.randn(x.shape, generator=gen) for s, x in view.splits.items()}
    return FeatureView(view.name, view.columns, noise, view.preparation)


def views_for(method: str, views: list[FeatureView], data: VerticalData) -> list[FeatureView]:
    if method in ("alone", "single"):
        return views[:1]
    if method in ("joint", "oracle"):
        return [VerticalData(views, data.labels, data.task, data.num_classes, data.joint).joint_view()]
    return views


def learner_settings(config: RunConfig, method: str, options: ColumnOptions = NO_OPTIONS) -> LearnerSettings:
    """The local learners' settings; 0 / auto values are left unset so each learner takes the paper's."""
    epochs = config.learner.epochs or None
    if method in ("late", "interm") and options.baseline_epochs:
        epochs = options.baseline_epochs
    devices = config.run.devices
    return LearnerSettings(
        epochs=epochs,
        lr=config.learner.lr or None,
        optimizer=None if config.learner.optimizer == "auto" else config.learner.optimizer,
        momentum=config.learner.momentum,
        weight_decay=config.learner.weight_decay,
        milestones=None if config.learner.milestones == ["auto"] else tuple(config.learner.milestones),
        gamma=config.learner.gamma,
        batch_size=config.learner.batch_size or None,
        shuffle=config.learner.shuffle,
        grad_clip=config.learner.grad_clip,
        hidden=tuple(config.learner.hidden),
        widths=tuple(config.learner.cnn_widths),
        last_pool=config.learner.cnn_last_pool,
        lstm_hidden=config.learner.lstm_hidden,
        dropout=config.learner.dropout,
        engine=config.run.engine,
        accelerator=config.run.accelerator,
        devices=int(devices) if devices.isdigit() else devices,
        strategy=config.run.strategy,
        precision=config.run.precision,
        dms=options.dms,
        callbacks=tuple(config.learner.callbacks),
    )


def organization_devices(device: torch.device, count: int) -> list[torch.device]:
    """Where each organization's data and models live: with ``cuda`` and several GPUs, round-robin over them."""
    if device.type == "cuda" and device.index is None and torch.cuda.device_count() > 1:
        return [torch.device("cuda", m % torch.cuda.device_count()) for m in range(count)]
    return [device] * count


@dataclass
class PartyPlan:
    """What every organization of a GAL-family or ASCII run is: its view, learner, local loss, output noise."""

    views: list[FeatureView]
    learners: list[str]
    losses: list[str]
    noisy: set[int]
    settings: LearnerSettings
    num_classes: int = 1  # the labels' classes (1: a regression), for parties that hold a copy of the labels


def plan_parties(config: RunConfig, method: str, data: VerticalData, options: ColumnOptions = NO_OPTIONS) -> PartyPlan:
    """The organizations ``method`` runs with (Alone: Alice only; Joint: one holding every feature). A view
    without rows (a party that runs elsewhere, :func:`hollow`) is planned but not transformed."""
    task = make_task(config, data, options)
    m_all = len(data.views)
    blank = organization_set(options.noninformative, m_all, "gal.noninformative_organizations", config.run.seed)
    views = [
        noninformative(v, seed_for(config.run.seed, m, 0xB1A)) if m in blank and v.splits else v
        for m, v in enumerate(data.views)
    ]
    views = views_for(method, views, data)
    noisy = (
        organization_set(options.noisy, m_all, "gal.noisy_organizations", config.run.seed)
        if options.noise_sigma
        else set()
    )
    learners = per_organization(config.learner.model, m_all, "learner.model")[: len(views)]
    default_loss = "l1" if (config.data.dataset in REGRESSION_L1_DATASETS or task.loss == "l1") else "l2"
    losses = [
        default_loss if q == "auto" else q for q in per_organization(list(options.local_loss), m_all, "gal.local_loss")
    ]
    for m, (v, name) in enumerate(zip(views, learners, strict=False)):
        if v.splits and not deep_arch(name) and len(v.example_shape) > 1:
            raise VCLInputError(
                f"learner.model={name!r} for organization {m} takes rows, but it holds examples of shape "
                f"{v.example_shape}; "
                "use cnn (images), lstm (sequences), linear or mlp."
            )
    settings = learner_settings(config, method, options)
    return PartyPlan(views, learners, losses[: len(views)], noisy, settings, max(data.num_classes, 1))


def build_parties(
    config: RunConfig, method: str, data: VerticalData, make, only=None, plan=None, options=NO_OPTIONS
) -> list:
    """The organizations of a GAL-family or ASCII run, Alice first: every one, or only party ``only`` (a party's own
    process). ``make(plan, m, device)`` makes the method's own party; ``plan``: made already, else from ``options``."""
    plan = plan or plan_parties(config, method, data, options)
    places = organization_devices(resolve_device(config.run.device), len(plan.views))
    return [make(plan, m, places[m]) for m in (range(len(plan.views)) if only is None else [only])]


def organizations_datamodule(config: RunConfig, only: int | None = None, ids: list[str] | None = None):
    """The data module of a GAL-family or ASCII run: image patches, sequence feature groups, or columns
    (``only``, ``ids``: one CSV organization's file alone; with new people's IDs, ``{"rows": ..., "new": ...}``, and
    for a finished run's prediction each organization's kept preparation by place, ``"kept"``, instead of rows)."""
    d = config.data
    new_ids = kept = None
    if isinstance(ids, dict):  # train.py predict (vcl.transports.wire.party_ids)
        ids, new_ids, kept = ids["rows"], ids["new"], ids.get("kept")
    if d.module:  # the user's own (vcl.models.user)
        shared_data_options(config)["resample"].refuse("a data.module makes its own splits")

        return build_datamodule(d.module)
    common = shared_data_options(config)
    common |= {"organizations": d.organizations, "val_fraction": d.val_fraction, "root": d.root}
    batch = config.learner.batch_size
    if DATASETS[d.dataset] == "image":
        return ImageDataModule(
            **common,
            download=d.download,
            view=d.image_view,
            max_train=d.max_train,
            batch_size=batch or 512,
        )
    common["feature_seed"] = config.run.seed
    if DATASETS[d.dataset] == "sequence":
        return SequenceDataModule(**common, size=d.sequence_size, batch_size=batch or 8)
    return TabularDataModule(
        **common,
        assignment=d.assignment or None,
        csv_files=d.csv_files,
        id_column=d.id_column,
        label_column=d.label_column,
        task=d.task or None,
        batch_size=batch or 1024,
        synthetic_train=d.synthetic_train,
        synthetic_test=d.synthetic_test,
        only=only,
        ids=ids,
        categorical=d.categorical,
        missing=d.missing,
        new_files=d.predict_files,
        new_ids=new_ids,
        kept=kept,
    )


class OrganizationFamily(Family):
    """A family whose organizations each hold a column view of the same rows, Alice the labels (GAL, ASCII); it reads
    :func:`organizations_datamodule`, and its parties keep their columns' preparation."""

    parties_keep_preparation = True
    messages = ORGANIZATION_MESSAGES  # what Alice and the organizations send each other (its subclasses' join them)

    def party(self, config: RunConfig, method: str, plan: PartyPlan, m: int, device):
        """Organization ``m``'s party (a :class:`vcl.family.Party`) from the plan: its view ``plan.views[m]``, its
        learner ``plan.learners[m]``, local loss ``plan.losses[m]`` and settings ``plan.settings``, on ``device``."""
        raise NotImplementedError(
            f"{type(self).__name__} makes no party: define party(config, method, plan, m, device)."
        )

    def column_options(self, config: RunConfig) -> ColumnOptions:
        """What this family decides of its organizations (:class:`ColumnOptions`); nothing by default."""
        return NO_OPTIONS

    def parties(self, config: RunConfig, method: str, data, only: int | None = None, plan: PartyPlan | None = None):
        """Every organization's party, or only party ``only``'s (``plan``: made already, at Alice)."""
        make = lambda p, m, d: self.party(config, method, p, m, d)  # noqa: E731
        return build_parties(config, method, data, make, only, plan, self.column_options(config))

    def datamodule(self, config: RunConfig, only: int | None = None, ids: list[str] | None = None):
        return organizations_datamodule(config, only, ids)
