"""Build a method (GAL and its baselines, ASCII and its variants, DC analysis and its references) from a run
config and the split data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from vcl.anchors import GridLayout, make_anchor_construction
from vcl.config import ASCII_METHODS, DC_METHODS, METHODS, MPDL_METHODS, RunConfig
from vcl.datamodules.grid import FEATURE_SPLITS, GridData
from vcl.datamodules.image import IMAGE_DATASETS
from vcl.datamodules.sources import csv_policies
from vcl.datamodules.tabular import VerticalData
from vcl.errors import VCLInputError
from vcl.federation import Federation
from vcl.losses import check_local_loss
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
from vcl.models.residual import PRECISIONS
from vcl.organization import FeatureView, Organization, seed_for
from vcl.paillier import check_key_bits
from vcl.privacy import check_dp_noise, make_mechanism
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
from vcl.protocols.ascii import ALPHAS, STOPS
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
from vcl.protocols.late import FUSIONS
from vcl.protocols.mpdl import build_overlap, overlap_parties
from vcl.psi import check_psi_bits
from vcl.tasks import Task
from vcl.transport import LocalTransport, Transport

REGRESSION_L1_DATASETS = ("diabetes", "boston")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise VCLInputError(f"device={name!r} but no CUDA device is visible; use device=cpu or auto.")
    try:
        return torch.device(name)
    except RuntimeError:
        raise VCLInputError(f"device={name!r} is not a device; use cpu, cuda, cuda:N or auto.") from None


def make_task(config: RunConfig, data: VerticalData) -> Task:
    loss = config.task_loss
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


def check_config(config: RunConfig) -> None:
    """Checks that need no data; data-dependent ones run when the datamodule is set up."""
    if config.method not in METHODS:
        raise VCLInputError(f"method={config.method!r} is unknown; use one of {', '.join(METHODS)}.")
    for m in config.compare:
        if m not in METHODS:
            raise VCLInputError(f"compare lists unknown method {m!r}; use methods from {', '.join(METHODS)}.")
    if config.rounds < 1:
        raise VCLInputError(f"rounds={config.rounds}; use at least 1.")
    if config.dataset == "csv":
        csv_policies(config.categorical, config.missing, len(config.csv_files) or 1)
    elif config.categorical != ["error"] or config.missing != ["error"]:
        raise VCLInputError(
            f"categorical / missing prepare CSV files (dataset=csv); dataset={config.dataset!r} needs neither, "
            "so leave them at error."
        )
    ascii_run = config.method in ASCII_METHODS
    for m in config.compare:
        if (ascii_method(config, m) in ASCII_METHODS) != ascii_run:
            raise VCLInputError(
                f"compare lists {m!r} beside method={config.method!r}; compare ASCII methods "
                f"({', '.join(ASCII_METHODS)}) only with each other, and the others likewise."
            )
    for name in config.learner:
        if ascii_run:
            check_weighted(check_classifier_name(name), config.ascii_resample)
        elif name != "gb-svm":
            check_learner_name(name)
    check_ascii_options(config)
    for name in config.local_loss:
        if name != "auto":
            check_local_loss(name)
    check_learner_losses(config)
    if config.weights not in ("learned", "bag", "last"):
        raise VCLInputError(f"weights={config.weights!r}; use learned, bag or last.")
    if config.eta not in ("linesearch", "constant"):
        raise VCLInputError(f"eta={config.eta!r}; use linesearch or constant.")
    if config.late_fusion not in FUSIONS:
        raise VCLInputError(f"late_fusion={config.late_fusion!r}; use sum (the paper) or mean (the authors' code).")
    if config.al_mode not in ("chained", "authors"):
        raise VCLInputError(f"al_mode={config.al_mode!r}; use chained or authors.")
    if config.engine not in ("fast", "trainer"):
        raise VCLInputError(f"engine={config.engine!r}; use fast or trainer.")
    if config.optimizer not in ("auto", "sgd", "adam"):
        raise VCLInputError(f"optimizer={config.optimizer!r}; use sgd, adam or auto.")
    if config.precision not in PRECISIONS:
        raise VCLInputError(f"precision={config.precision!r}; use one of {', '.join(PRECISIONS)}.")
    if config.milestones != ["auto"] and not all(isinstance(m, int) and m > 0 for m in config.milestones):
        raise VCLInputError(f"milestones={config.milestones}; give positive epoch numbers, [] for none, or auto.")
    for key in ("epochs", "batch_size", "baseline_epochs", "max_train"):
        if getattr(config, key) < 0:
            raise VCLInputError(f"{key}={getattr(config, key)}; use a positive number, or 0 for the default.")
    if config.lr < 0:
        raise VCLInputError(f"lr={config.lr}; use a positive learning rate, or 0 for the paper's.")
    if not config.cnn_widths or not all(isinstance(w, int) and w > 0 for w in config.cnn_widths):
        raise VCLInputError(f"cnn_widths={config.cnn_widths}; give positive channel counts, e.g. [64, 128, 256, 512].")
    if config.dms and any(name not in DEEP for name in config.learner):
        raise VCLInputError(
            f"dms=true shares a deep feature extractor; use learner cnn, lstm, mlp or linear, not {config.learner}."
        )
    if "interm" in (config.method, *config.compare) and any(n not in ("mlp", "cnn", "lstm") for n in config.learner):
        raise VCLInputError(
            f"interm averages the organizations' hidden layers, which learner={config.learner} has not; "
            "use learner mlp (cnn for images, lstm for sequences)."
        )
    resolve_device(config.device)
    make_mechanism(config.privacy, config.privacy_alpha)
    if config.privacy_scope not in ("others", "all"):
        raise VCLInputError(f"privacy_scope={config.privacy_scope!r}; use others or all.")
    if config.noise_sigma < 0:
        raise VCLInputError(f"noise_sigma={config.noise_sigma}; use a standard deviation ≥ 0.")
    for key in ("noisy_organizations", "noninformative_organizations"):
        for v in getattr(config, key):
            if v != "half" and not (isinstance(v, int) and v >= 0):
                raise VCLInputError(f"{key} lists {v!r}; give organization indices (0 is Alice) or half.")
    check_dc_config(config)
    check_mpdl_config(config)
    check_transport(config)


def check_transport(config: RunConfig) -> None:
    if config.transport not in ("local", "ray"):
        raise VCLInputError(f"transport={config.transport!r}; use local (one process) or ray (one actor per party).")
    if config.transport == "local":
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        raise VCLInputError("transport=ray needs Ray; install it with pip install 'vcl[ray]'.") from None


def check_learner_losses(config: RunConfig) -> None:
    """Every organization's learner can fit its local loss (GB: l1 or l2), checked before any data is read."""
    if config.method in ASCII_METHODS or config.method in DC_METHODS or config.method in MPDL_METHODS:
        return
    count = len(config.csv_files) if config.dataset == "csv" else config.organizations
    try:
        learners = per_organization(config.learner, count, "learner")
        losses = per_organization(config.local_loss, count, "local_loss")
    except VCLInputError:
        return  # a list of the wrong length is reported, by name, when the organizations are built
    for m, (name, loss) in enumerate(zip(learners, losses, strict=True)):
        if loss != "auto":  # auto is l1 or l2
            check_learner_loss(name, loss, f" (organization {m})")


def compare_methods(config: RunConfig) -> list[str]:
    """The methods run beside the main one; ``alone`` is DC's Local reference and MPDL's FTL reference."""
    if config.method in DC_METHODS:
        return list(dict.fromkeys("local" if m == "alone" else m for m in config.compare))
    if config.method in MPDL_METHODS:
        return list(dict.fromkeys("ftl" if m == "alone" else m for m in config.compare))
    return list(config.compare)


def check_mpdl_config(config: RunConfig) -> None:
    """The MPDL options (checked for every method, so a shipped config never hides a bad value)."""
    runs = [config.method, *compare_methods(config)]
    if any(m in MPDL_METHODS for m in runs) and not all(m in MPDL_METHODS for m in runs):
        raise VCLInputError(
            f"method={config.method!r} with compare={config.compare} mixes MPDL methods ({', '.join(MPDL_METHODS)}) "
            "with others; they split the rows differently, so compare MPDL methods only with each other."
        )
    if not 0.0 < config.mpdl_gamma < 1.0:
        raise VCLInputError(
            f"mpdl_gamma={config.mpdl_gamma}; use a co-occurrence probability strictly between 0 and 1."
        )
    if config.mpdl_epsilon < 0:
        raise VCLInputError(f"mpdl_epsilon={config.mpdl_epsilon}; use a privacy budget > 0, or 0 for no privacy.")
    if config.mpdl_lambda < 0:
        raise VCLInputError(f"mpdl_lambda={config.mpdl_lambda}; use a weight >= 0 (0 turns the duality term off).")
    if config.mpdl_folds < 2:
        raise VCLInputError(f"mpdl_folds={config.mpdl_folds}; use at least 2 folds (the paper: 5).")
    for key in ("mpdl_max_iterations", "mpdl_dual_epochs", "mpdl_central_epochs", "mpdl_batch_size"):
        if getattr(config, key) < 1:
            raise VCLInputError(f"{key}={getattr(config, key)}; use at least 1.")
    if config.mpdl_lr <= 0:
        raise VCLInputError(f"mpdl_lr={config.mpdl_lr}; use a positive learning rate (the paper: 0.1).")
    for key in ("mpdl_hidden", "mpdl_max_rows", "mpdl_ftl_dim"):
        if getattr(config, key) < 0:
            raise VCLInputError(f"{key}={getattr(config, key)}; use a positive number, or 0 for the default.")
    for key, allowed in (("mpdl_central", ("mlp", "cnn")), ("mpdl_dual_arch", ("mlp", "cnn"))):
        if getattr(config, key) not in allowed:
            raise VCLInputError(f"{key}={getattr(config, key)!r}; use one of {', '.join(allowed)}.")
        if getattr(config, key) == "cnn" and config.dataset not in IMAGE_DATASETS and config.method in MPDL_METHODS:
            raise VCLInputError(
                f"{key}=cnn needs an image dataset ({', '.join(IMAGE_DATASETS)}), not {config.dataset!r}."
            )
    if config.mpdl_dual_clip < 0:
        raise VCLInputError(f"mpdl_dual_clip={config.mpdl_dual_clip}; use a gradient-norm bound > 0, or 0 for none.")
    check_dp_noise(config.mpdl_dp_noise)
    check_key_bits(config.mpdl_key_bits)
    check_psi_bits(config.mpdl_psi_bits)


def mpdl_options(config: RunConfig) -> MPDLOptions:
    return MPDLOptions(
        gamma=config.mpdl_gamma,
        epsilon=config.mpdl_epsilon,
        lam=config.mpdl_lambda,
        folds=config.mpdl_folds,
        threshold=config.mpdl_threshold,
        iterations=min(config.mpdl_max_iterations, config.rounds),
        dual_epochs=config.mpdl_dual_epochs,
        central_epochs=config.mpdl_central_epochs,
        lr=config.mpdl_lr,
        batch_size=config.mpdl_batch_size,
        paillier=config.mpdl_paillier,
        key_bits=config.mpdl_key_bits,
        psi_bits=config.mpdl_psi_bits,
        hidden=config.mpdl_hidden,
        ftl_dim=config.mpdl_ftl_dim,
        central=config.mpdl_central,
        dual_arch=config.mpdl_dual_arch,
        dp_noise=config.mpdl_dp_noise,
        dual_clip=config.mpdl_dual_clip,
        device=str(resolve_device(config.device)),
    )


def check_dc_config(config: RunConfig) -> None:
    """The DC options (checked for every method, so a shipped config never hides a bad value)."""
    runs = [config.method, *compare_methods(config)]
    if any(m in DC_METHODS for m in runs) and not all(m in DC_METHODS for m in runs):
        raise VCLInputError(
            f"method={config.method!r} with compare={config.compare} mixes DC methods ({', '.join(DC_METHODS)}) "
            "with others; they split the data differently, so compare DC methods only with DC methods."
        )
    for key in ("dc_row_groups", "dc_column_groups", "dc_anchor_rows", "dc_tree_splits", "dc_tsvd_rank", "dc_top_t"):
        if getattr(config, key) < 1:
            raise VCLInputError(f"{key}={getattr(config, key)}; use at least 1.")
    if config.dc_feature_split not in FEATURE_SPLITS:
        raise VCLInputError(f"dc_feature_split={config.dc_feature_split!r}; use one of {', '.join(FEATURE_SPLITS)}.")
    if config.dc_public_rows < 0:
        raise VCLInputError(f"dc_public_rows={config.dc_public_rows}; use 0 or more rows.")
    if config.dc_collab_dim < 0:
        raise VCLInputError(f"dc_collab_dim={config.dc_collab_dim}; use 0 (automatic) or a positive dimension.")
    if config.dc_smote_alpha <= 0:
        raise VCLInputError(f"dc_smote_alpha={config.dc_smote_alpha}; use a positive alpha (1.5 keeps the variance).")
    if config.dc_tsvd_delta < 0:
        raise VCLInputError(f"dc_tsvd_delta={config.dc_tsvd_delta}; use a perturbation delta >= 0.")
    if "dc_smote" in runs and not 1 <= config.dc_smote_k <= config.dc_public_rows - 1:
        raise VCLInputError(
            f"dc_smote_k={config.dc_smote_k} with dc_public_rows={config.dc_public_rows}; "
            "use 1 <= dc_smote_k <= dc_public_rows - 1."
        )
    make_reduction(config.dc_reduction, 1, 0)
    make_central(config.dc_central, 0)
    make_interpretable(config.dc_interpretable, config.dc_tree_splits, 0)


def ascii_method(config: RunConfig, method: str) -> str:
    """Beside an ASCII method, ``alone`` and ``joint`` mean its own references, ``single`` and ``oracle``."""
    if config.method in ASCII_METHODS:
        return {"alone": "single", "joint": "oracle"}.get(method, method)
    return method


def check_ascii_options(config: RunConfig) -> None:
    if config.ascii_stop not in STOPS:
        raise VCLInputError(f"ascii_stop={config.ascii_stop!r}; use alpha or cv.")
    if config.ascii_alpha not in ALPHAS:
        raise VCLInputError(f"ascii_alpha={config.ascii_alpha!r}; use exact or paper.")
    if config.ascii_stop == "cv" and config.val_fraction <= 0:
        raise VCLInputError("ascii_stop=cv needs a validation split; set val_fraction (the paper holds out 0.5).")
    if config.ascii_patience < 1:
        raise VCLInputError(f"ascii_patience={config.ascii_patience}; use at least 1 round.")
    if config.max_depth < 0:
        raise VCLInputError(f"max_depth={config.max_depth}; use a depth ≥ 1, or 0 for unlimited.")
    if config.n_trees < 1:
        raise VCLInputError(f"n_trees={config.n_trees}; use at least 1 tree.")
    if config.synthetic_train < 2 or config.synthetic_test < 1:
        raise VCLInputError(
            f"synthetic_train={config.synthetic_train}, synthetic_test={config.synthetic_test}; "
            "use at least 2 training rows and 1 test row."
        )


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
    epochs = config.epochs or None
    if method in ("late", "interm") and config.baseline_epochs:
        epochs = config.baseline_epochs
    devices = config.devices
    return LearnerSettings(
        epochs=epochs,
        lr=config.lr or None,
        optimizer=None if config.optimizer == "auto" else config.optimizer,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        milestones=None if config.milestones == ["auto"] else tuple(config.milestones),
        gamma=config.gamma,
        batch_size=config.batch_size or None,
        grad_clip=config.grad_clip,
        hidden=tuple(config.hidden),
        widths=tuple(config.cnn_widths),
        last_pool=config.cnn_last_pool,
        lstm_hidden=config.lstm_hidden,
        dropout=config.dropout,
        engine=config.engine,
        accelerator=config.accelerator,
        devices=int(devices) if devices.isdigit() else devices,
        strategy=config.strategy,
        precision=config.precision,
        dms=config.dms,
    )


def organization_devices(device: torch.device, count: int) -> list[torch.device]:
    """Where each organization's data and models live: with ``cuda`` and several GPUs, round-robin over them."""
    if device.type == "cuda" and device.index is None and torch.cuda.device_count() > 1:
        return [torch.device("cuda", m % torch.cuda.device_count()) for m in range(count)]
    return [device] * count


def dc_options(config: RunConfig, method: str) -> DCOptions:
    return DCOptions(
        anchor=method.removeprefix("dc_"),
        reduction=config.dc_reduction,
        dim=config.dc_dim,
        collab_dim=config.dc_collab_dim,
        central=config.dc_central,
        interpretable=config.dc_interpretable,
        tree_splits=config.dc_tree_splits,
        top_t=config.dc_top_t,
    )


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
            config.dc_anchor_rows,
            config.dc_smote_k,
            config.dc_smote_alpha,
            config.dc_tsvd_rank,
            config.dc_tsvd_delta,
        )
    layout = GridLayout(c, data.column_groups)
    parties = []
    for k in range(count) if only is None else [only]:
        if k == count - 1:
            evaluation = Evaluation({s: data.full(s) for s in data.labels}, data.labels, options, config.seed)
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
            config.seed,
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
    protocol = cls(task, Federation(transport=transport), data.labels, grid, layout, options, seed=config.seed)
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
    blank = organization_set(config.noninformative_organizations, m_all, "noninformative_organizations")
    views = [
        noninformative(v, seed_for(config.seed, m, 0xB1A)) if m in blank and v.splits else v
        for m, v in enumerate(data.views)
    ]
    views = views_for(method, views, data)
    noisy = organization_set(config.noisy_organizations, m_all, "noisy_organizations") if config.noise_sigma else set()
    learners = per_organization(config.learner, m_all, "learner")[: len(views)]
    default_loss = "l1" if (config.dataset in REGRESSION_L1_DATASETS or task.loss == "l1") else "l2"
    losses = [default_loss if q == "auto" else q for q in per_organization(config.local_loss, m_all, "local_loss")]
    for m, (v, name) in enumerate(zip(views, learners, strict=False)):
        if v.splits and name not in DEEP and len(v.example_shape) > 1:
            raise VCLInputError(
                f"learner={name!r} for organization {m} takes rows, but it holds examples of shape {v.example_shape}; "
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
    places = organization_devices(resolve_device(config.device), len(plan.views))
    which = range(len(plan.views)) if only is None else [only]
    if method == "interm":
        k = make_task(config, data).num_outputs
        return [
            IntermParty(plan.views[m], plan.learners[m], plan.settings, k, config.seed, m, places[m]) for m in which
        ]
    if method in ASCII_METHODS:
        trees = ClassifierSettings(
            max_depth=config.max_depth or None, n_trees=config.n_trees, resample=config.ascii_resample
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
            output_noise=config.noise_sigma if m in plan.noisy else 0.0,
            seed=config.seed,
            place=m,
        )
        for m in which
    ]


def open_transport(config: RunConfig, method: str, data, names: list[str], parties, concurrent=False) -> Transport:
    """How the coordinator reaches ``method``'s parties ``names``: one Ray actor per party (each builds itself),
    or in this process (``parties()`` builds them; ``concurrent``: the local batched executor)."""
    dirs = per_organization(config.party_dirs, len(names), "party_dirs", who="parties")
    if config.transport == "ray":
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
            config, method, data, names, lambda: overlap_parties(options, data, config.seed, method == "mpdl")
        )
        return build_overlap(method, task, data, options, config.seed, transport)
    method = ascii_method(config, method)
    device = resolve_device(config.device)
    task = make_task(config, data)
    if method in ASCII_METHODS:
        check_ascii_task(config, method, task)
    plan = plan_parties(config, method, data)  # every setting checked before a party is built
    labels = {s: y.to(device) for s, y in data.labels.items()}
    concurrent = config.concurrent and method not in ASCII_METHODS
    names = [v.name for v in plan.views]
    transport = open_transport(
        config, method, data, names, lambda: build_parties(config, method, data, plan=plan), concurrent
    )
    if method in ASCII_METHODS:
        options = ASCIIOptions(
            variant=ASCII_VARIANTS.get(method, "ascii"),
            stop=config.ascii_stop,
            patience=config.ascii_patience,
            alpha=config.ascii_alpha,
        )
        protocol = AssistedClassification(task, Federation(transport=transport), labels, options, seed=config.seed)
        protocol.name = method
        return protocol
    privacy = make_mechanism(config.privacy, config.privacy_alpha)
    federation = Federation(transport=transport, privacy=privacy, privacy_scope=config.privacy_scope)
    if method == "late":
        return LateFusion(task, federation, labels, fusion=config.late_fusion, seed=config.seed)
    if method == "interm":
        return IntermFusion(task, federation, labels, seed=config.seed)
    options = GALOptions(
        weights=config.weights,
        eta=config.eta,
        eta_value=config.eta_value,
        eta_cap=config.eta_cap or None,
        weight_loss=plan.losses[0],
    )
    if method == "al":
        authors = config.al_mode == "authors"
        options = GALOptions(
            weights="last" if authors else "learned",
            eta="constant",
            eta_value=config.eta_value,
            sequential=not authors,
            weight_loss=plan.losses[0],
        )
    protocol = GradientAssistedLearning(task, federation, labels, options, seed=config.seed)
    protocol.name = method
    return protocol


ASCII_VARIANTS = {"ascii_simple": "simple", "ascii_random": "random", "ensemble_adaboost": "ensemble"}


def check_ascii_task(config: RunConfig, method: str, task: Task) -> None:
    if task.kind != "classification":
        raise VCLInputError(f"method={method} is for classification; dataset={config.dataset!r} is a regression task.")
    if task.num_outputs < 2:
        raise VCLInputError(f"method={method} needs at least 2 classes in dataset={config.dataset!r}.")
