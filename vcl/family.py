"""A method family: the one contract through which vcl builds every run, whichever transport carries it.

A **family** is the methods that split the data alike and may be compared with each other (GAL with Alone, Joint,
AL, Late and Interm fusion; ASCII with its variants; DC with its references; MPDL with FTL). A family is a subclass
of :class:`Family` in a package of its own, built-in or the user's; the run builder
(:mod:`vcl.coordinator.assembly`) asks it for

- ``check(config)``: what the options' types cannot say and needs no data (one :class:`VCLInputError` sentence);
- ``datamodule(config, only, ids)``: the data module its runs read (``only``: party ``only``'s own file alone,
  on the aligned ``ids``); :class:`vcl.methods.columns.OrganizationFamily` reads the organizations' column
  views, as GAL and ASCII do;
- ``parties(config, method, data, only)``: its parties, every one or only party ``only`` (what a party's own
  process builds from the config, under ``ray`` or ``grpc``); each a :class:`Party`;
- ``build(config, data, method)``: its coordinator (a :class:`vcl.protocol.Protocol`), whose ``run_round()``
  sends messages to the parties through its federation (:meth:`vcl.coordinator.federation.Federation.open`), returns
  the round's record, and whose ``predict(split)`` is the prediction stage;

and reads its attributes: ``name``, ``methods`` (the methods it runs), ``reference`` (the method run beside the main one
when ``compare`` is unset, or None), ``messages`` (its message classes: the wire format of ``grpc`` looks a frame's kind
up among the message classes of the families a process has loaded, so a family registers its own), ``skips_missing``
(its methods whose rounds go on without a party that is down, ``run.missing_parties: skip``: their rounds take the
replies that came, :meth:`vcl.coordinator.federation.Federation.request_all` leaving None for a party left out),
``joint_methods`` (its methods whose one party holds every organization's columns, GAL's Joint: a party of theirs loads
every view), ``peer_messages`` (the kinds its parties send each other: a party takes no other kind from another party,
refused before it reaches the party), ``parties_keep_preparation`` (whether its parties keep their columns' fitted
preparation in their checkpoints, :meth:`Party.preparation`: a finished run of CSV files then predicts from its
checkpoints and the new rows alone, each party built again from its own), ``outside`` (its parties outside the protocol,
an experimenter that scores the run: their messages are kept but not counted as communication, and they are no
organization of results.json), ``party_loads_all_data`` (whether a party's own process loads the whole data set and
keeps its part, as DC and MPDL do, or reads only its own view) and ``options`` (an outside family's options: a dataclass
that the config's ``options`` mapping fills) and ``auditor`` (the module of its attacks on what its receivers kept:
``audit(run)``, given a :class:`vcl.audit.run.KeptRun`, returns ``{"attacks": [vcl.audit.attacks.Score], "budget": [a
dict of vcl.audit.budget], "not_attacked": [why a message faces no attack]}``; imported only where a run is audited,
after it, on Alice's side; None: ``train.py audit`` says it has none).

A built-in family is named by the registry (:mod:`vcl.registry`); a family outside vcl by its class path in the
config (``method: my_pkg.MyMethod``), imported where the run starts and, under ``grpc``, by each party
process that lists the class in its ``allow_classes``. ``docs/extending.md`` writes one from scratch.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vcl.classpath import import_class
from vcl.errors import VCLInputError
from vcl.registry import FAMILIES, METHODS, is_class_path
from vcl.transports.wire import register_messages

if TYPE_CHECKING:
    from vcl.config import RunConfig


class Party:
    """What a family's party is to the runtime that hosts it (:class:`vcl.party.runtime.PartyRuntime`), wherever it
    runs: its ``name``; ``handle(message)``, its reply (None for a message that asks none); its own state
    (``state_dict`` / ``load_state_dict``: data only, what its checkpoint holds); the messages it addressed to other
    parties since last asked (``outgoing``); the device it trains on; its own logs, where it runs (``open_logs``:
    its folder; ``log_round``: a round's line, once that round is saved; ``close_logs``). Subclass it and override
    what differs: the defaults keep no state, send nothing to other parties, train on the CPU and keep no logs.
    Nothing outside the runtime reads a party's attributes.

    Every message reaches a party through ``handle``, or — where several parties of one class run in one process
    (the local transport, ``run.concurrent``) and the coordinator asks them together — through their class's
    :meth:`handle_batch`, which answers each as ``handle`` would."""

    name: str = ""

    def handle(self, message):
        raise NotImplementedError(f"{type(self).__name__} answers no message: define handle(message).")

    @classmethod
    def handle_batch(cls, parties: list, messages: list) -> list:
        """Each party's reply to its message (``parties[i]`` answers ``messages[i]``; all are of this class, each
        named once), in order: the same replies, and the same state kept by each party, as each ``handle`` alone. The
        default answers them one by one; a class whose parties can do their work together (GAL's organizations: one
        vmapped fit for a round's requests) overrides it."""
        return [party.handle(message) for party, message in zip(parties, messages, strict=True)]

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def preparation(self) -> list[dict] | None:
        """What it keeps in its checkpoints beside its state so that it can be built again on new rows alone, without
        its training data (``train.py predict`` of a finished run): the fitted preparation of each organization's
        columns it holds (:meth:`vcl.datamodules.prepare.Preparation.state`). None (the default): it keeps none."""
        return None

    def outgoing(self) -> list:
        return []

    def device(self):
        return "cpu"

    def open_logs(self, folder: Path) -> None:
        pass

    def log_round(self, folder: Path, round_: int) -> None:
        pass

    def close_logs(self) -> None:
        pass


class Family:
    """The contract of a method family (the module's docstring); subclass it and override what differs."""

    name: str = ""
    methods: tuple[str, ...] = ()
    reference: str | None = None
    messages: tuple[type, ...] = ()
    peer_messages: tuple[type, ...] = ()
    party_loads_all_data: bool = False
    parties_keep_preparation: bool = False
    options: type | None = None
    auditor: str | None = None
    skips_missing: tuple[str, ...] = ()
    joint_methods: tuple[str, ...] = ()
    outside: tuple[str, ...] = ()

    def check(self, config: RunConfig) -> None:
        """What the options' types cannot say and needs no data; nothing by default."""

    def datamodule(self, config: RunConfig, only: int | None = None, ids: list[str] | None = None):
        raise NotImplementedError

    def parties(self, config: RunConfig, method: str, data, only: int | None = None) -> list:
        raise NotImplementedError

    def build(self, config: RunConfig, data, method: str):
        raise NotImplementedError

    def alice_data(self, data):
        """What Alice's coordinator keeps of the data set loaded in full where the parties run apart (each loads its
        own): by default (a :class:`vcl.datamodules.tabular.VerticalData`) her labels and every party's name, no
        feature."""
        from vcl.datamodules.tabular import VerticalData, hollow

        return VerticalData([hollow(v) for v in data.views], data.labels, data.task, data.num_classes)

    def round_callbacks(self, config: RunConfig) -> list:
        """The round callbacks this family's options ask for (GAL: early stop on η); none by default."""
        return []

    def own_options(self, config: RunConfig) -> Any:
        """An outside family's options: its ``options`` dataclass filled from the config's ``options`` mapping
        (one sentence for a name it does not have)."""
        values = dict(config.options)
        if self.options is None:
            if values:
                raise VCLInputError(f"options={values} but method {config.method} takes no options; leave it empty.")
            return None
        known = {f.name for f in dataclasses.fields(self.options)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise VCLInputError(
                f"options.{unknown[0]}: method {config.method} has no such option; it takes {', '.join(sorted(known))}."
            )
        return self.options(**values)


def family_path(method: str) -> str:
    """The class path of ``method``'s family: the registry's, or the method itself when it is a class path."""
    if method in METHODS:
        return FAMILIES[METHODS[method]]
    if is_class_path(method):
        return method
    raise VCLInputError(
        f"method={method!r} is neither one of vcl's methods ({', '.join(METHODS)}) nor a family's class path "
        "(my_pkg.MyMethod); name one of them."
    )


@functools.cache
def load_family(path: str) -> Family:
    """The family whose class ``path`` names (``package.module:Class`` or ``package.module.Class``), made once per
    process; its messages join the wire format's table (with those of the families it derives from). One sentence if it
    cannot be imported or is no family."""

    cls = import_class(path.replace(":", "."), f"method={path}", Family, "method family")
    family = cls()
    for base in cls.__mro__:  # a family's own messages and those of the families it derives from
        register_messages(vars(base).get("messages", ()))
    return family


def family_for(method: str) -> Family:
    """The family that runs ``method`` (a registered method's name, or an outside family's class path)."""
    return load_family(family_path(method))


def family_name(method: str) -> str:
    """The family's name (``GAL``, ``ASCII``, ``DC``, ``MPDL`` or an outside family's), its class not loaded for a
    registered method."""
    return METHODS[method] if method in METHODS else family_for(method).name or method


def family_of(config: RunConfig, method: str | None = None) -> Family:
    """The family that runs ``method`` (default: the config's) in this run: a registered method's, a class path's,
    or, for a name an outside family gives one of its methods, the family of the config's method."""
    method = method or config.method
    if method in METHODS or is_class_path(method):
        return family_for(method)
    own = family_for(config.method)
    if method in own.methods:
        return own
    raise VCLInputError(
        f"compare lists {method!r}, which is no method of {config.method}'s family; name one of "
        f"{', '.join(methods_of(config))}."
    )


def methods_of(config: RunConfig, family: Family | None = None) -> list[str]:
    """Every method of the config's method's family (``family``, looked up if not given; what ``compare`` may name
    beside it)."""
    if config.method in METHODS:
        return [m for m, f in METHODS.items() if f == METHODS[config.method]]
    return list(dict.fromkeys([config.method, *(family or family_for(config.method)).methods]))


def compare_methods(config: RunConfig, family: Family | None = None) -> list[str]:
    """The methods run beside the main one: those ``compare`` names, or, unset, the reference of ``family`` (the
    config's method's, looked up if not given)."""
    if config.compare is None:
        reference = (family or family_for(config.method)).reference
        return [reference] if reference else []
    return list(dict.fromkeys(config.compare))
