"""Build a method (GAL and its baselines, ASCII and its variants, DC analysis and its references) from a run
config and the split data."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from vcl.anchors import GridLayout, make_anchor_construction
from vcl.config import ASCII_METHODS, DC_METHODS, METHODS, MPDL_METHODS, RunConfig
from vcl.datamodules.grid import GridData
from vcl.datamodules.image import IMAGE_DATASETS
from vcl.datamodules.sources import csv_policies
from vcl.datamodules.tabular import VerticalData
from vcl.errors import VCLInputError
from vcl.federation import Federation
from vcl.messages import EXPERIMENTER
from vcl.models import (
    DEEP,
    ClassifierSettings,
    LearnerSettings,
    check_classifier_name,
    check_learner_loss,
    check_learner_name,
    check_weighted,
)
from vcl.organization import FeatureView, Organization, seed_for
from vcl.paillier import check_key_bits
from vcl.privacy import make_mechanism
from vcl.protocols import (
    ASCIIOptions,
    AssistedClassification,
    GALOptions,
    GradientAssistedLearning,
    IgnoranceAgent,
    IntermFusion,
    LateFusion,
    MPDLOptions,
    Protocol,
)
from vcl.protocols.dc import (
    Centralized,
    DataCollaboration,
    DCOptions,
    DCWorker,
    Evaluation,
    Experimenter,
    Local,
    make_central,
    make_interpretable,
    make_reduction,
)
from vcl.protocols.interm import IntermParty
from vcl.protocols.mpdl import build_overlap, overlap_parties
from vcl.tasks import Task
from vcl.transport import LocalTransport, Transport

REGRESSION_L1_DATASETS = ("diabetes", "boston")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise VCLInputError(f"run.device={name!r} but no CUDA device is visible; use run.device=cpu or auto.")
    try:
        return torch.device(name)
    except RuntimeError:
        raise VCLInputError(f"run.device={name!r} is not a device; use cpu, cuda, cuda:N or auto.") from None


def make_task(config: RunConfig, data: VerticalData) -> Task:
    loss = config.gal.task_loss
    if loss == "auto":
        loss = "ce" if data.task == "classification" else "l1"
    return Task(data.task, data.num_classes, loss)


def per_organization(values: list, count: int, what: str, who: str = "organizations") -> list:
    """One setting for all organizations, or one each; ``gb-svm`` = GB for the first half, SVM after."""
    if len(values) == 1 and values[0] == "gb-svm":
        return ["gb"] * (count // 2) + ["svm"] * (count - count // 2)
    if len(values) == 1:
        return list(values) * count
    if len(values) != count:
        raise VCLInputError(f"{what} lists {len(values)} values for {count} {who}; give 1 or {count}.")
    return list(values)


def family(method: str) -> str:
    """Methods of one family split the data alike and may be compared with each other."""
    return next(
        name
        for name, members in (("ASCII", ASCII_METHODS), ("DC", DC_METHODS), ("MPDL", MPDL_METHODS), ("GAL", METHODS))
        if method in members
    )


def check_config(config: RunConfig) -> None:
    """What the options' types cannot say and needs no data (data-dependent checks run when it is loaded)."""
    for m in compare_methods(config):
        if family(m) != family(config.method):
            raise VCLInputError(
                f"compare lists {m!r} beside method={config.method!r}, which is {family(config.method)}; "
                "methods of different families split the data differently, so compare a method only with its own."
            )
    if config.data.dataset == "csv":
        csv_policies(config.data.categorical, config.data.missing, len(config.data.csv_files) or 1)
    for name in config.learner.model:
        if family(config.method) == "ASCII":
            check_weighted(check_classifier_name(name), config.ascii.resample)
        elif name != "gb-svm":
            check_learner_name(name)
    check_learner_losses(config)
    if config.gal.dms and any(name not in DEEP for name in config.learner.model):
        raise VCLInputError(
            f"gal.dms=true shares a deep feature extractor; use learner.model cnn, lstm, mlp or linear, "
            f"not {config.learner.model}."
        )
    if "interm" in (config.method, *config.compare) and any(
        n not in ("mlp", "cnn", "lstm") for n in config.learner.model
    ):
        raise VCLInputError(
            f"interm averages the organizations' hidden layers, which learner.model={config.learner.model} has not; "
            "use mlp (cnn for images, lstm for sequences)."
        )
    resolve_device(config.run.device)
    for key in ("central", "dual_arch"):
        if (
            getattr(config.mpdl, key) == "cnn"
            and config.data.dataset not in IMAGE_DATASETS
            and family(config.method) == "MPDL"
        ):
            raise VCLInputError(
                f"mpdl.{key}=cnn needs an image dataset ({', '.join(IMAGE_DATASETS)}), not {config.data.dataset!r}."
            )
    check_key_bits(config.mpdl.key_bits)
    make_reduction(config.dc.reduction, 1, 0)
    make_central(config.dc.central, 0)
    make_interpretable(config.dc.interpretable, config.dc.tree_splits, 0)
    if config.transport.kind == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise VCLInputError("transport.kind=ray needs Ray; install it with pip install 'vcl[ray]'.") from None


def check_learner_losses(config: RunConfig) -> None:
    """Every organization's learner can fit its local loss (GB: l1 or l2), checked before any data is read."""
    if config.method in ASCII_METHODS or config.method in DC_METHODS or config.method in MPDL_METHODS:
        return
    count = len(config.data.csv_files) if config.data.dataset == "csv" else config.data.organizations
    try:
        learners = per_organization(config.learner.model, count, "learner.model")
        losses = per_organization(config.gal.local_loss, count, "gal.local_loss")
    except VCLInputError:
        return  # a list of the wrong length is reported, by name, when the organizations are built
    for m, (name, loss) in enumerate(zip(learners, losses, strict=True)):
        if loss != "auto":  # auto is l1 or l2
            check_learner_loss(name, loss, f" (organization {m})")


def compare_methods(config: RunConfig) -> list[str]:
    """The methods run beside the main one; ``alone`` is DC's Local reference and MPDL's FTL reference, and
    beside ASCII ``alone`` and ``joint`` are its own ``single`` and ``oracle``."""
    if config.method in ASCII_METHODS:
        return list(dict.fromkeys(ascii_method(config, m) for m in config.compare))
    if config.method in DC_METHODS:
        return list(dict.fromkeys("local" if m == "alone" else m for m in config.compare))
    if config.method in MPDL_METHODS:
        return list(dict.fromkeys("ftl" if m == "alone" else m for m in config.compare))
    return list(config.compare)


def mpdl_options(config: RunConfig) -> MPDLOptions:
    iterations = min(config.mpdl.max_iterations, config.run.rounds)
    device = str(resolve_device(config.run.device))
    return MPDLOptions(**dataclasses.asdict(config.mpdl), iterations=iterations, device=device)


def ascii_method(config: RunConfig, method: str) -> str:
    """Beside an ASCII method, ``alone`` and ``joint`` mean its own references, ``single`` and ``oracle``."""
    if config.method in ASCII_METHODS:
        return {"alone": "single", "joint": "oracle"}.get(method, method)
    return method


def organization_set(values: list, count: int, key: str) -> set[int]:
    """Indices from a config list; ``half`` = the second half, M//2 .. M−1 (GAL Tables 6 and 19–21)."""
    out: set[int] = set()
    for v in values:
        if v == "half":
            out |= set(range(count // 2, count)) if count > 1 else set()
        elif v >= count:
            raise VCLInputError(f"{key} lists organization {v}, but there are {count}; use 0..{count - 1}.")
        else:
            out.add(int(v))
    return out


def noninformative(view: FeatureView, seed: int) -> FeatureView:
    """The same organization with inputs replaced by N(0, 1) noise: no predictive power (GAL Tables 19–21)."""
    gen = torch.Generator().manual_seed(seed)
    return FeatureView(
        view.name, view.columns, {s: torch.randn(x.shape, generator=gen) for s, x in view.splits.items()}
    )


def views_for(method: str, views: list[FeatureView], data: VerticalData) -> list[FeatureView]:
    if method in ("alone", "single"):
        return views[:1]
    if method in ("joint", "oracle"):
        return [VerticalData(views, data.labels, data.task, data.num_classes, data.joint).joint_view()]
    return views


def learner_settings(config: RunConfig, method: str) -> LearnerSettings:
    """The local learners' settings; 0 / auto values are left unset so each learner takes the paper's."""
    epochs = config.learner.epochs or None
    if method in ("late", "interm") and config.gal.baseline_epochs:
        epochs = config.gal.baseline_epochs
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
        dms=config.gal.dms,
    )


def organization_devices(device: torch.device, count: int) -> list[torch.device]:
    """Where each organization's data and models live: with ``cuda`` and several GPUs, round-robin over them."""
    if device.type == "cuda" and device.index is None and torch.cuda.device_count() > 1:
        return [torch.device("cuda", m % torch.cuda.device_count()) for m in range(count)]
    return [device] * count


def dc_options(config: RunConfig, method: str) -> DCOptions:
    return DCOptions(**dataclasses.asdict(config.dc), anchor=method.removeprefix("dc_"))


def collaboration_parties(config: RunConfig, data: GridData, method: str, only: int | None = None) -> list:
    """The c × d workers in row-major order, then the experimenter: every one, or only party ``only``
    (what a party's own process builds from the config, :mod:`vcl.ray_transport`)."""
    options = dc_options(config, method)
    c = len(data.parties)
    count = c * len(data.column_groups) + 1
    construction = None
    if method.startswith("dc_"):
        construction = make_anchor_construction(
            options.anchor,
            config.dc.anchor_rows,
            config.dc.smote_k,
            config.dc.smote_alpha,
            config.dc.tsvd_rank,
            config.dc.tsvd_delta,
        )
    layout = GridLayout(c, data.column_groups)
    parties = []
    for k in range(count) if only is None else [only]:
        if k == count - 1:
            evaluation = Evaluation({s: data.full(s) for s in data.labels}, data.labels, options, config.run.seed)
            rows = [row[0].splits["train"].shape[0] for row in data.parties]
            parties.append(Experimenter(evaluation, rows, data.num_classes))
            continue
        i, j = divmod(k, len(data.column_groups))
        worker = DCWorker(
            data.parties[i][j],
            (i, j),
            data.column_groups[j],
            data.group_labels[i],
            data.public,
            data.num_classes,
            options,
            config.run.seed,
            construction,
            layout,
        )
        _ = worker.dim  # a party too small for dc_dim fails here, before any work
        parties.append(worker)
    return parties


def build_collaboration(config: RunConfig, data: GridData, method: str) -> Protocol:
    """DC analysis (dc_smote, dc_tsvd, dc_rand, dc_raw) or a reference (centralized, local) on c × d workers,
    with the master as the coordinator and the experimenter as one more party."""
    grid = [[v.name for v in row] for row in data.parties]
    names = [n for row in grid for n in row] + [EXPERIMENTER]
    transport = open_transport(config, method, data, names, lambda: collaboration_parties(config, data, method))
    task = Task(data.task, data.num_classes, "ce")
    cls = {"centralized": Centralized, "local": Local}.get(method, DataCollaboration)
    layout = GridLayout(len(grid), data.column_groups)
    options = dc_options(config, method)
    protocol = cls(task, Federation(transport=transport), data.labels, grid, layout, options, seed=config.run.seed)
    protocol.name = method
    return protocol


@dataclass
class PartyPlan:
    """What every organization of a GAL-family or ASCII run is: its view, learner, local loss, output noise."""

    views: list[FeatureView]
    learners: list[str]
    losses: list[str]
    noisy: set[int]
    settings: LearnerSettings


def plan_parties(config: RunConfig, method: str, data: VerticalData) -> PartyPlan:
    """The organizations ``method`` runs with (Alone: Alice only; Joint: one holding every feature). A view
    without rows (a party that runs elsewhere, :func:`vcl.ray_transport.hollow`) is planned but not transformed."""
    task = make_task(config, data)
    m_all = len(data.views)
    blank = organization_set(config.gal.noninformative_organizations, m_all, "gal.noninformative_organizations")
    views = [
        noninformative(v, seed_for(config.run.seed, m, 0xB1A)) if m in blank and v.splits else v
        for m, v in enumerate(data.views)
    ]
    views = views_for(method, views, data)
    noisy = (
        organization_set(config.gal.noisy_organizations, m_all, "gal.noisy_organizations")
        if config.gal.noise_sigma
        else set()
    )
    learners = per_organization(config.learner.model, m_all, "learner.model")[: len(views)]
    default_loss = "l1" if (config.data.dataset in REGRESSION_L1_DATASETS or task.loss == "l1") else "l2"
    losses = [
        default_loss if q == "auto" else q for q in per_organization(config.gal.local_loss, m_all, "gal.local_loss")
    ]
    for m, (v, name) in enumerate(zip(views, learners, strict=False)):
        if v.splits and name not in DEEP and len(v.example_shape) > 1:
            raise VCLInputError(
                f"learner.model={name!r} for organization {m} takes rows, but it holds examples of shape "
                f"{v.example_shape}; "
                "use cnn (images), lstm (sequences), linear or mlp."
            )
    return PartyPlan(views, learners, losses[: len(views)], noisy, learner_settings(config, method))


def build_parties(
    config: RunConfig, method: str, data: VerticalData, only: int | None = None, plan: PartyPlan | None = None
) -> list:
    """The parties of a GAL-family or ASCII run, Alice first: every one, or only party ``only`` (what a
    party's own process builds from the config, :mod:`vcl.ray_transport`); ``plan``: already made."""
    method = ascii_method(config, method)
    plan = plan or plan_parties(config, method, data)
    places = organization_devices(resolve_device(config.run.device), len(plan.views))
    which = range(len(plan.views)) if only is None else [only]
    if method == "interm":
        k = make_task(config, data).num_outputs
        return [
            IntermParty(plan.views[m], plan.learners[m], plan.settings, k, config.run.seed, m, places[m]) for m in which
        ]
    if method in ASCII_METHODS:
        trees = ClassifierSettings(
            max_depth=config.learner.max_depth or None, n_trees=config.learner.n_trees, resample=config.ascii.resample
        )
        return [
            IgnoranceAgent(plan.views[m], plan.learners[m], plan.settings, trees, max(data.num_classes, 1), places[m])
            for m in which
        ]
    return [
        Organization(
            plan.views[m],
            plan.learners[m],
            plan.losses[m],
            plan.settings,
            places[m],
            output_noise=config.gal.noise_sigma if m in plan.noisy else 0.0,
            seed=config.run.seed,
            place=m,
        )
        for m in which
    ]


def open_transport(config: RunConfig, method: str, data, names: list[str], parties, concurrent=False) -> Transport:
    """How the coordinator reaches ``method``'s parties ``names``: one Ray actor per party (each builds itself),
    or in this process (``parties()`` builds them; ``concurrent``: the local batched executor)."""
    dirs = per_organization(config.transport.party_dirs, len(names), "transport.party_dirs", who="parties")
    if config.transport.kind == "ray":
        from vcl.ray_transport import RayTransport

        transport = RayTransport(config, method, names, data)
    else:
        transport = LocalTransport(parties(), concurrent=concurrent)
    transport.party_roots = {name: Path(d) for name, d in zip(names, dirs, strict=True) if d}
    return transport


def build_protocol(config: RunConfig, data: VerticalData | GridData, method: str | None = None) -> Protocol:
    method = method or config.method
    if method in DC_METHODS:
        return build_collaboration(config, data, method)
    if method in MPDL_METHODS:
        task = Task(data.task, data.num_classes, "ce")
        options = mpdl_options(config)
        names = ["a", "b", EXPERIMENTER]
        transport = open_transport(
            config, method, data, names, lambda: overlap_parties(options, data, config.run.seed, method == "mpdl")
        )
        return build_overlap(method, task, data, options, config.run.seed, transport)
    method = ascii_method(config, method)
    device = resolve_device(config.run.device)
    task = make_task(config, data)
    if method in ASCII_METHODS:
        check_ascii_task(config, method, task)
    plan = plan_parties(config, method, data)  # every setting checked before a party is built
    labels = {s: y.to(device) for s, y in data.labels.items()}
    concurrent = config.run.concurrent and method not in ASCII_METHODS
    names = [v.name for v in plan.views]
    transport = open_transport(
        config, method, data, names, lambda: build_parties(config, method, data, plan=plan), concurrent
    )
    if method in ASCII_METHODS:
        options = ASCIIOptions(
            variant=ASCII_VARIANTS.get(method, "ascii"),
            stop=config.ascii.stop,
            patience=config.ascii.patience,
            alpha=config.ascii.alpha,
        )
        protocol = AssistedClassification(task, Federation(transport=transport), labels, options, seed=config.run.seed)
        protocol.name = method
        return protocol
    privacy = make_mechanism(config.gal.privacy, config.gal.privacy_alpha)
    federation = Federation(transport=transport, privacy=privacy, privacy_scope=config.gal.privacy_scope)
    if method == "late":
        return LateFusion(task, federation, labels, fusion=config.gal.late_fusion, seed=config.run.seed)
    if method == "interm":
        return IntermFusion(task, federation, labels, seed=config.run.seed)
    options = GALOptions(
        weights=config.gal.weights,
        eta=config.gal.eta,
        eta_value=config.gal.eta_value,
        eta_cap=config.gal.eta_cap or None,
        weight_loss=plan.losses[0],
    )
    if method == "al":
        authors = config.gal.al_mode == "authors"
        options = GALOptions(
            weights="last" if authors else "learned",
            eta="constant",
            eta_value=config.gal.eta_value,
            sequential=not authors,
            weight_loss=plan.losses[0],
        )
    protocol = GradientAssistedLearning(task, federation, labels, options, seed=config.run.seed)
    protocol.name = method
    return protocol


ASCII_VARIANTS = {"ascii_simple": "simple", "ascii_random": "random", "ensemble_adaboost": "ensemble"}


def check_ascii_task(config: RunConfig, method: str, task: Task) -> None:
    if task.kind != "classification":
        raise VCLInputError(
            f"method={method} is for classification; data.dataset={config.data.dataset!r} is a regression task."
        )
    if task.num_outputs < 2:
        raise VCLInputError(f"method={method} needs at least 2 classes in data.dataset={config.data.dataset!r}.")
