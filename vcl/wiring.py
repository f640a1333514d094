"""How a run is put together from its config: the one place that builds parties, their data and the transport.

- The organizations of a GAL-family or ASCII run: their views, learners, local losses, devices and settings,
  the data module they read; each method's own module says what party it makes of them.
- The transport that reaches a run's parties (in this process, or one Ray actor per party, each of which builds
  its own party through :func:`own_party`).
- Runs from the method table (:mod:`vcl.registry`): a method's protocol, its data module, its checks.
- Where parties run apart: what the coordinator loads (no party's features) and what each party loads.

Protocols import this module for their parts; it reaches a family's module only through the registry's names
(``importlib``), so nothing here imports a protocol."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import torch

from vcl.config import RunConfig, config_integers, party_copy
from vcl.datamodules.grid import GridData
from vcl.datamodules.image import ImageDataModule
from vcl.datamodules.overlap import OverlapData
from vcl.datamodules.sequence import SequenceDataModule
from vcl.datamodules.tabular import FeatureView, TabularDataModule, VerticalData
from vcl.errors import VCLInputError
from vcl.loop import seed_for
from vcl.models import LearnerSettings, deep_arch
from vcl.registry import DATASETS, FAMILIES, METHODS, compare_methods, family_of
from vcl.tasks import Task
from vcl.transport import LocalTransport, Transport

if TYPE_CHECKING:
    from vcl.protocols.base import Protocol

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


def plan_parties(config: RunConfig, method: str, data: VerticalData) -> PartyPlan:
    """The organizations ``method`` runs with (Alone: Alice only; Joint: one holding every feature). A view
    without rows (a party that runs elsewhere, :func:`hollow`) is planned but not transformed."""
    task = make_task(config, data)
    m_all = len(data.views)
    blank = organization_set(
        config.gal.noninformative_organizations, m_all, "gal.noninformative_organizations", config.run.seed
    )
    views = [
        noninformative(v, seed_for(config.run.seed, m, 0xB1A)) if m in blank and v.splits else v
        for m, v in enumerate(data.views)
    ]
    views = views_for(method, views, data)
    noisy = (
        organization_set(config.gal.noisy_organizations, m_all, "gal.noisy_organizations", config.run.seed)
        if config.gal.noise_sigma
        else set()
    )
    learners = per_organization(config.learner.model, m_all, "learner.model")[: len(views)]
    default_loss = "l1" if (config.data.dataset in REGRESSION_L1_DATASETS or task.loss == "l1") else "l2"
    losses = [
        default_loss if q == "auto" else q for q in per_organization(config.gal.local_loss, m_all, "gal.local_loss")
    ]
    for m, (v, name) in enumerate(zip(views, learners, strict=False)):
        if v.splits and not deep_arch(name) and len(v.example_shape) > 1:
            raise VCLInputError(
                f"learner.model={name!r} for organization {m} takes rows, but it holds examples of shape "
                f"{v.example_shape}; "
                "use cnn (images), lstm (sequences), linear or mlp."
            )
    return PartyPlan(views, learners, losses[: len(views)], noisy, learner_settings(config, method))


def build_parties(config: RunConfig, method: str, data: VerticalData, make, only=None, plan=None) -> list:
    """The organizations of a GAL-family or ASCII run, Alice first: every one, or only party ``only`` (what a
    party's own process builds from the config, :mod:`vcl.ray_transport`). ``make(plan, m, device)`` is the
    method's own party; ``plan``: already made."""
    plan = plan or plan_parties(config, method, data)
    places = organization_devices(resolve_device(config.run.device), len(plan.views))
    return [make(plan, m, places[m]) for m in (range(len(plan.views)) if only is None else [only])]


def organizations(config: RunConfig, method: str, data: VerticalData, parties, concurrent: bool):
    """What an organization-based method's builder starts from: its task, its plan (every setting checked
    before a party is built), Alice's labels on her device, and the transport to the parties that
    ``parties(config, method, data, plan=plan)`` builds."""
    task = make_task(config, data)
    plan = plan_parties(config, method, data)
    device = resolve_device(config.run.device)
    labels = {s: y.to(device) for s, y in data.labels.items()}
    names = [v.name for v in plan.views]
    build = lambda: parties(config, method, data, plan=plan)  # noqa: E731
    return task, plan, labels, open_transport(config, method, data, names, build, concurrent)


def open_transport(config: RunConfig, method: str, data, names: list[str], parties, concurrent=False) -> Transport:
    """How the coordinator reaches ``method``'s parties ``names``: one Ray actor per party (each builds itself),
    or in this process (``parties()`` builds them; ``concurrent``: the local batched executor)."""
    dirs = per_organization(config.transport.party_dirs, len(names), "transport.party_dirs", who="parties")
    if config.transport.kind == "ray":
        from vcl.ray_transport import RayTransport

        count, t = len(names), config.transport
        resources = {
            what: per_organization(getattr(t, f"party_{what}"), count, f"transport.party_{what}", who="parties")
            for what in ("cpus", "gpus", "nodes")
        }
        transport = RayTransport(config, method, names, data, own_party, resources)
    elif config.transport.kind == "grpc":
        from vcl.grpc_transport import GrpcTransport

        transport = GrpcTransport(config, method, names, data)
    else:
        transport = LocalTransport(parties(), concurrent=concurrent)
    transport.party_roots = {name: Path(d) for name, d in zip(names, dirs, strict=True) if d}
    return transport


def shared_data_options(config: RunConfig) -> dict:
    """What every data module takes from the ``data`` group alike."""
    d = config.data
    return {"dataset": d.dataset, "split_seed": d.split_seed, "test_fraction": d.test_fraction}


def organizations_datamodule(config: RunConfig, only: int | None = None, ids: list[str] | None = None):
    """The data module of a GAL-family or ASCII run: image patches, sequence feature groups, or columns
    (``only``, ``ids``: one CSV organization's file alone)."""
    d = config.data
    if d.module:  # the user's own (vcl.models.user)
        from vcl.datamodules.user import build_datamodule

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
    )


def federation(config: RunConfig, transport: Transport):
    """Alice's federation in a GAL-family run: the transport to the organizations and the privacy of her broadcast
    (the noise from her own secret; the attack scored with every number a receiver's copy of the config holds)."""
    from vcl.federation import Federation
    from vcl.privacy import make_mechanism

    return Federation(
        transport=transport,
        privacy=make_mechanism(config.gal.privacy, config.gal.privacy_alpha),
        privacy_scope=config.gal.privacy_scope,
        noise_secret=config.gal.privacy_secret or None,
        known_seeds=config_integers(party_copy(config.to_dict())),  # all a receiver's copy of the config holds
    )


# --- runs from the registry (vcl.registry): a method's protocol, its data, a party in its own process ---
def family(method: str) -> ModuleType:
    """The module of ``method``'s family."""
    return importlib.import_module(FAMILIES[family_of(method)])


def build_protocol(config: RunConfig, data, method: str | None = None) -> Protocol:
    """``method``'s protocol (default: the config's), built by its own module from the config and the data."""
    method = method or config.method
    return importlib.import_module(METHODS[method][1]).build(config, data, method)


def datamodule_for(config: RunConfig, only: int | None = None, ids: list[str] | None = None):
    """The data module the config's method reads (``only``, ``ids``: one CSV organization's file alone)."""
    return family(config.method).datamodule(config, only, ids)


def own_party(config: RunConfig, method: str, index: int, ids, kind: str, num_classes: int):
    """Party ``index`` of ``method``, built in its own process from the config (:mod:`vcl.ray_transport`)."""
    fam = family(method)
    if fam.PARTY_LOADS_ALL_DATA:  # it keeps its own part at once (the experimenter keeps everything)
        dm = fam.datamodule(config)
        dm.setup()
        data = dm.data
    else:
        data = party_data(config, method, index, ids, kind, num_classes)
    own = importlib.import_module(METHODS[method][1])  # a method with parties of its own (Interm), else the family's
    return getattr(own, "parties", fam.parties)(config, method, data, only=index)[0]


def check_config(config: RunConfig) -> None:
    """What the options' types cannot say and needs no data (data-dependent checks run when it is loaded)."""
    from vcl.datamodules.csv_files import csv_policies

    own = family_of(config.method)
    for m in compare_methods(config):
        if family_of(m) != own:
            mine = ", ".join(k for k, (f, _) in METHODS.items() if f == own)
            raise VCLInputError(
                f"compare lists {m!r} beside method={config.method!r}, which is {own}; methods of different "
                f"families split the data differently, so compare it with {own}'s own: {mine}."
            )
    if config.data.dataset == "csv":
        csv_policies(config.data.categorical, config.data.missing, len(config.data.csv_files) or 1)
    if config.data.module:
        if own not in ("GAL", "ASCII"):
            raise VCLInputError(
                f"data.module gives organizations' column views, which the GAL and ASCII methods read; {own}'s "
                f"method {config.method!r} splits its data itself: leave data.module empty and name data.dataset."
            )
        from vcl.datamodules.user import build_datamodule

        build_datamodule(config.data.module)  # the class imports and takes its init_args, before any work
    resolve_device(config.run.device)
    family(config.method).check(config)
    if config.transport.kind == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise VCLInputError("transport.kind=ray needs Ray; install it with pip install 'vcl[ray]'.") from None
    if config.transport.kind == "grpc":
        from vcl.errors import regular_file

        t = config.transport
        for key in ("tls_ca", "tls_cert", "tls_key"):
            if not getattr(t, key):
                raise VCLInputError(f"transport.kind=grpc needs transport.{key}: a PEM file (python -m vcl.certs).")
            fix = "make the federation's files with python -m vcl.certs"
            regular_file(Path(getattr(t, key)), f"transport.{key}", fix)
        for address in t.addresses.values():
            host, sep, port = address.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise VCLInputError(f"transport.addresses: {address!r} is not host:port; e.g. bob.example.org:50052.")


# --- where parties run apart (transport.kind: ray or grpc): what the coordinator and each party load ---
def hollow(view: FeatureView) -> FeatureView:
    """A party's name without its data: what the coordinator knows of a party that runs elsewhere."""
    return FeatureView(view.name, [], {})


def coordinator_data(config: RunConfig) -> VerticalData:
    """What Alice's coordinator loads where parties run apart: her labels and every party's name, no feature.

    For ``dataset: csv`` it opens only Alice's file; each other party's IDs are read in that party's own
    process (on its node) for the row alignment.
    """
    if config.data.dataset != "csv" or config.data.module:
        dm = datamodule_for(config)
        dm.setup()
        if config.data.module:
            from vcl.datamodules.user import check_vertical

            check_vertical(dm)
        data = dm.data
        if isinstance(data, GridData):  # DC: the master's grid of names; labels only for round 0's prior and metrics
            parties = [[hollow(v) for v in row] for row in data.parties]
            return replace(data, parties=parties, group_labels=[], public=torch.empty(0))
        if isinstance(data, OverlapData):  # MPDL: C's view: each party's width and image layout, labels for metrics
            a, b = (replace(d, ids=[], train=d.train[:0], test=d.test[:0]) for d in (data.a, data.b))
            return replace(data, a=a, b=b, truth={"a_only_labels": data.truth["a_only_labels"]})
        return VerticalData([hollow(v) for v in data.views], data.labels, data.task, data.num_classes)
    from vcl.datamodules.csv_files import csv_ids, csv_policies, shared_ids

    files = config.data.csv_files
    if not files:
        raise VCLInputError(
            "data.dataset=csv needs data.csv_files: one CSV per organization, Alice's (with the label) first."
        )
    drop = [m == "drop" for _, m in csv_policies(config.data.categorical, config.data.missing, len(files))]
    names = [Path(f).stem for f in files]
    own = csv_ids(files[0], config.data.id_column, drop[0], config.data.label_column)
    ids = shared_ids(psi_with_parties(config, names, own, drop), config.data.id_column, any(drop))
    dm = datamodule_for(config, only=0, ids=ids)
    dm.setup()
    alice = dm.data
    views = [hollow(alice.views[0])] + [FeatureView(Path(f).stem, [], {}) for f in files[1:]]
    return VerticalData(views, alice.labels, alice.task, alice.num_classes, ids=ids)


def psi_with_parties(config: RunConfig, names: list[str], own: list[str], drop: list[bool]) -> list[list[str]]:
    """Alice's IDs, then for each other party the part of them it holds too, by private set intersection (star:
    Alice and each party, :mod:`vcl.psi`): each party reads its own file where it runs (its Ray node, or its
    machine for grpc) and answers Alice's blinded IDs; no party's ID list, raw or hashed, reaches Alice."""
    from vcl.psi import PSISide

    alice = PSISide(names[0], own)
    offer = alice.offer()
    if config.transport.kind == "grpc":
        from vcl.grpc_transport import psi_answers

        answers = psi_answers(config, names, drop, offer)
    else:
        import ray

        from vcl.ray_transport import _get, _placement, start_ray

        t = config.transport
        start_ray(t.address, sum(per_organization(t.party_cpus, len(names), "transport.party_cpus", who="parties")))
        nodes = per_organization(t.party_nodes, len(names), "transport.party_nodes", who="parties")
        read = ray.remote(num_cpus=0)(psi_answer)
        d = config.data
        refs = [
            read.options(**_placement(nodes[k])).remote(f, d.id_column, drop[k], d.label_column, offer)
            for k, f in enumerate(d.csv_files[1:], 1)
        ]
        answers = _get(refs, names[1:], "the ID alignment")
    lists = [own]
    for answer in answers:
        alice.answer(answer["offer"])  # the party's IDs blinded by both (kept inside Alice's side)
        lists.append([own[row] for row in alice.match(answer["twice"])])
    return lists


def psi_answer(path: str, id_column: str, drop: bool, label_column: str, offer) -> dict:
    """A party's half of the star PSI, where its file is (a Ray task on its node, or its own party process under
    grpc): Alice's blinded IDs blinded again, and its own IDs blinded once."""
    from vcl.datamodules.csv_files import csv_ids
    from vcl.psi import PSISide

    side = PSISide(Path(path).stem, csv_ids(path, id_column, drop, label_column))
    return {"twice": side.answer(offer), "offer": side.offer()}


def party_data(config: RunConfig, method: str, index: int, ids, kind: str, num_classes: int) -> VerticalData:
    """What party ``index`` loads in its own process: its own view (every view for Joint, which is one
    party holding every feature), no labels (they come, if at all, in messages)."""
    everything = method in ("joint", "oracle")
    if config.data.dataset == "csv" and not everything:
        dm = datamodule_for(config, only=index, ids=ids)
        dm.setup()
        views = [FeatureView(Path(f).stem, [], {}) for f in config.data.csv_files]
        views[index] = dm.data.views[0]
        return VerticalData(views, {}, kind, num_classes)
    dm = datamodule_for(config, ids=ids) if config.data.dataset == "csv" else datamodule_for(config)
    dm.setup()
    data = dm.data
    views = [v if everything or m == index else hollow(v) for m, v in enumerate(data.views)]
    return VerticalData(views, {}, kind, num_classes, joint=data.joint if everything else None)
