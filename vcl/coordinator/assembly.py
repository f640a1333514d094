"""How a run is put together from its config: the run builder. What every family shares: a config's checks
(which look its family up, once a run) and, where parties run apart, what the coordinator loads (no party's
features). A party's side is :mod:`vcl.party.loading`; docs/design.md ("Methods")."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vcl.alignment.psi import PSISide
from vcl.config import RunConfig
from vcl.config.resolve import resolve_device
from vcl.datamodules.csv_files import aligned, csv_ids, csv_policies, shared_ids
from vcl.datamodules.reading import string_array
from vcl.datamodules.tabular import FeatureView, VerticalData
from vcl.datamodules.user import build_datamodule, check_vertical
from vcl.errors import PartyLost, VCLInputError
from vcl.family import Family, compare_methods, family_name, family_of, methods_of
from vcl.storage.checkpoints import kept_preparation
from vcl.transport import transport_class

if TYPE_CHECKING:
    from vcl.protocol import Protocol


# --- a run from its family (vcl.family): its protocol, its data, a party in its own process ---
# Each takes the run's family as the runner looked it up once (``family``; looked up here for a caller that has none).
def build_protocol(config: RunConfig, data, method: str | None = None, family: Family | None = None) -> Protocol:
    """``method``'s protocol (default: the config's), built by its family from the config and the data."""
    method = method or config.method
    return (family or family_of(config, method)).build(config, data, method)


def datamodule_for(config: RunConfig, only: int | None = None, ids=None, family: Family | None = None):
    """The data module the config's method reads (``only``, ``ids``: one CSV organization's file alone)."""
    return (family or family_of(config)).datamodule(config, only, ids)


def check_config(config: RunConfig, family: Family | None = None) -> Family:
    """What the options' types cannot say and needs no data (data-dependent checks run when it is loaded); the
    config's family, which the run hands down from here."""

    own = family or family_of(config)
    for m in compare_methods(config, own):
        if m not in methods_of(config, own):
            mine, name = ", ".join(methods_of(config, own)), family_name(config.method)
            raise VCLInputError(
                f"compare lists {m!r} beside method={config.method!r}, which is {name}; methods of different "
                f"families split the data differently, so compare it with {name}'s own: {mine}."
            )
    if config.data.dataset == "csv":
        csv_policies(config.data.categorical, config.data.missing, len(config.data.csv_files) or 1)
    skipping = [m for m in (config.method, *compare_methods(config, own)) if m not in own.skips_missing]
    if config.run.missing_parties == "skip" and skipping:
        able = f"with {', '.join(own.skips_missing)} (compare included)" if own.skips_missing else "with another family"
        raise VCLInputError(
            f"run.missing_parties=skip: method {skipping[0]} cannot leave an organization out of a round yet; use it "
            f"{able}, or run.missing_parties=fail."
        )
    if config.data.module:
        if own.party_loads_all_data:
            raise VCLInputError(
                f"data.module gives organizations' column views, which the GAL and ASCII methods read; {own.name}'s "
                f"method {config.method!r} splits its data itself: leave data.module empty and name data.dataset."
            )

        build_datamodule(config.data.module)  # the class imports and takes its init_args, before any work
    resolve_device(config.run.device)
    own.own_options(config)
    own.check(config)
    transport_class(config.transport.kind).check(config)
    return own


# --- where parties run apart (transport.kind: ray or grpc): what the coordinator and each party load ---
def coordinator_data(config: RunConfig, ids: list[str] | None = None, family: Family | None = None) -> VerticalData:
    """What Alice's coordinator loads where parties run apart: her labels and every party's name, no feature (of CSV
    files only Alice's is opened); ``ids``: the rows a run aligned already (kept in its checkpoint)."""
    family = family or family_of(config)
    if config.data.dataset != "csv" or config.data.module:
        dm = datamodule_for(config, family=family)
        dm.setup()
        if config.data.module:
            check_vertical(dm)
        return family.alice_data(dm.data)

    d = config.data
    if not d.csv_files:
        raise VCLInputError(
            "data.dataset=csv needs data.csv_files: one CSV per organization, Alice's (with the label) first."
        )
    drop = [m == "drop" for _, m in csv_policies(d.categorical, d.missing, len(d.csv_files))]
    names = [Path(f).stem for f in d.csv_files]
    places = None
    if ids is None:
        own = csv_ids(d.csv_files[0], d.id_column, drop[0], d.label_column, keep=True)  # loaded below
        lists, offered_at = psi_with_parties(config, names, own, drop)
        keys, rows = aligned(lists, id_column=d.id_column, dropped=any(drop))
        ids, places = keys.to_pylist(), {name: at[r] for (name, at), r in zip(offered_at.items(), rows, strict=True)}
    new_ids = None
    if d.predict_files:  # train.py predict: the new people's rows are aligned as the training rows were
        own = csv_ids(d.predict_files[0], d.id_column, drop[0], d.label_column)
        new_ids = shared_ids(psi_with_parties(config, names, own, drop, new=True)[0], d.id_column, any(drop), least=1)
    dm = datamodule_for(config, 0, ids if new_ids is None else {"rows": ids, "new": new_ids}, family)
    dm.setup()
    alice = dm.data
    views = [FeatureView(alice.views[0].name, [], {})] + [FeatureView(Path(f).stem, [], {}) for f in d.csv_files[1:]]
    return VerticalData(
        views, alice.labels, alice.task, alice.num_classes, ids=ids, new_ids=new_ids, classes=alice.classes,
        places=places,
    )  # fmt: skip


def kept_data(config: RunConfig, run: dict, where: dict, family: Family | None = None) -> VerticalData:
    """What the coordinator holds to score new people with a finished run whose parties keep their preparation
    (``train.py predict``): the new people's rows aligned by ID, the run's task and classes, no labels and no
    training file. ``where``: the run's stamp and each party's last saved round and folder, where parties run apart."""
    d = config.data
    task, classes = run["task"], run["classes"]
    names = [Path(f).stem for f in d.csv_files]
    if transport_class(config.transport.kind).apart:
        drop = [m == "drop" for _, m in csv_policies(d.categorical, d.missing, len(d.csv_files))]
        own = csv_ids(d.predict_files[0], d.id_column, drop[0], d.label_column)
        new_ids = shared_ids(psi_with_parties(config, names, own, drop, new=True)[0], d.id_column, any(drop), least=1)
        views = [FeatureView(name, [], {}) for name in names]
        return VerticalData(views, {}, task, run["num_classes"], new_ids=new_ids, classes=classes, checkpoints=where)
    preparations = {}
    for name, round_ in where["rounds"].items():
        folder = Path(where["roots"].get(name) or where["root"])
        preparations |= kept_preparation(name, folder, round_, where["run"])
    dm = datamodule_for(config, ids={"rows": None, "new": None, "kept": preparations}, family=family)
    dm.setup()
    return replace(dm.data, task=task, num_classes=run["num_classes"], classes=classes)


def psi_with_parties(
    config: RunConfig, names: list[str], own: list[str], drop: list[bool], new: bool = False
) -> tuple[list, dict]:
    """Alice's IDs, then for each other party the part of them it holds too, by private set intersection with each party
    in turn (docs/deployment.md, "Row alignment by private set intersection"; ``new``: new people's files), each an
    Arrow array in Alice's file order; with them, by party, each ID's place in that party's PSI offer."""
    alice = PSISide(names[0], own)
    offer = alice.offer()
    answers = transport_class(config.transport.kind).psi_answers(config, names, drop, offer, new)
    lists, places = [string_array(own)], {names[0]: np.arange(len(own))}
    for name, answer in zip(names[1:], answers, strict=True):
        if isinstance(answer, PartyLost):  # a party that is down (run.missing_parties: skip) aligns nothing
            if config.run.missing_parties != "skip":
                raise answer
            continue
        alice.answer(answer["offer"])  # the party's IDs blinded by both (kept inside Alice's side)
        rows, places[name] = alice.shared(answer["twice"])
        lists.append(lists[0].take(rows))
    return lists, places
