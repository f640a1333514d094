"""Every method vcl runs, in one table, and the few calls that go through it.

A **family** is the methods that split the data alike and may be compared with each other: GAL (with its
baselines Alone, Joint, AL, Late and Interm fusion), ASCII (with its variants and the Single / Oracle
references), DC (with the Centralized / Local references) and MPDL (with the FTL reference). A family's
module says how its runs are built:

- ``datamodule(config, only=None, ids=None)``: the data module its runs read;
- ``parties(config, method, data, only=None, plan=None)``: its parties, every one or only ``only`` (what a
  party's own process builds, :mod:`vcl.ray_transport`);
- ``check(config)``: what the options' types cannot say about it and needs no data;
- ``PARTY_LOADS_ALL_DATA``: whether a party's own process loads the whole data set and keeps its part (DC,
  MPDL) or reads only its own view (GAL, ASCII).

A **method** names its family and the module whose ``build(config, data, method)`` makes its protocol.
Adding a method is its own module (protocol and ``build``) and one line in :data:`METHODS`. Nothing here is
imported until a run needs it, so the command line can list the methods without importing torch.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vcl.config import RunConfig
    from vcl.protocols.base import Protocol

FAMILIES = {
    "GAL": "vcl.protocols.gal",
    "ASCII": "vcl.protocols.ascii",
    "DC": "vcl.protocols.dc",
    "MPDL": "vcl.protocols.mpdl",
}

# what a run is compared with when ``compare`` is unset: each family's reference of one party alone
REFERENCES = {"GAL": "alone", "ASCII": "single", "DC": "local", "MPDL": "ftl"}

# method: (family, the module whose build() makes it)
METHODS = {
    "gal": ("GAL", "vcl.protocols.gal"),
    "alone": ("GAL", "vcl.protocols.gal"),
    "joint": ("GAL", "vcl.protocols.gal"),
    "al": ("GAL", "vcl.protocols.gal"),
    "late": ("GAL", "vcl.protocols.late"),
    "interm": ("GAL", "vcl.protocols.interm"),
    "ascii": ("ASCII", "vcl.protocols.ascii"),
    "ascii_simple": ("ASCII", "vcl.protocols.ascii"),
    "ascii_random": ("ASCII", "vcl.protocols.ascii"),
    "ensemble_adaboost": ("ASCII", "vcl.protocols.ascii"),
    "single": ("ASCII", "vcl.protocols.ascii"),
    "oracle": ("ASCII", "vcl.protocols.ascii"),
    "dc_smote": ("DC", "vcl.protocols.dc"),
    "dc_tsvd": ("DC", "vcl.protocols.dc"),
    "dc_rand": ("DC", "vcl.protocols.dc"),
    "dc_raw": ("DC", "vcl.protocols.dc"),
    "centralized": ("DC", "vcl.protocols.dc"),
    "local": ("DC", "vcl.protocols.dc"),
    "mpdl": ("MPDL", "vcl.protocols.mpdl"),
    "ftl": ("MPDL", "vcl.protocols.mpdl"),
}


def family_of(method: str) -> str:
    """The family's name: ``GAL``, ``ASCII``, ``DC`` or ``MPDL``."""
    return METHODS[method][0]


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


def compare_methods(config: RunConfig) -> list[str]:
    """The methods run beside the main one: those ``compare`` names, or, unset, the family's reference."""
    if config.compare is None:
        return [REFERENCES[family_of(config.method)]]
    return list(dict.fromkeys(config.compare))


def own_party(config: RunConfig, method: str, index: int, ids, kind: str, num_classes: int):
    """Party ``index`` of ``method``, built in its own process from the config (:mod:`vcl.ray_transport`)."""
    fam = family(method)
    if fam.PARTY_LOADS_ALL_DATA:  # it keeps its own part at once (the experimenter keeps everything)
        dm = fam.datamodule(config)
        dm.setup()
        data = dm.data
    else:
        from vcl.ray_transport import party_data

        data = party_data(config, method, index, ids, kind, num_classes)
    return fam.parties(config, method, data, only=index)[0]


def check_config(config: RunConfig) -> None:
    """What the options' types cannot say and needs no data (data-dependent checks run when it is loaded)."""
    from vcl.datamodules.sources import csv_policies
    from vcl.errors import VCLInputError
    from vcl.parties import resolve_device

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
        from vcl.models.user import build_datamodule

        build_datamodule(config.data.module)  # the class imports and takes its init_args, before any work
    resolve_device(config.run.device)
    family(config.method).check(config)
    if config.transport.kind == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise VCLInputError("transport.kind=ray needs Ray; install it with pip install 'vcl[ray]'.") from None
