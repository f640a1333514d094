"""Every method vcl runs, in one table: a pure table (no torch, no Ray, no devices), which the command line
reads to list the methods without importing anything else. :mod:`vcl.wiring` builds runs from it.

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
Adding a method is its own module (protocol and ``build``) and one line in :data:`METHODS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vcl.config import RunConfig

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
    "late": ("GAL", "vcl.protocols.gal.late"),
    "interm": ("GAL", "vcl.protocols.gal.interm"),
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


def compare_methods(config: RunConfig) -> list[str]:
    """The methods run beside the main one: those ``compare`` names, or, unset, the family's reference."""
    if config.compare is None:
        return [REFERENCES[family_of(config.method)]]
    return list(dict.fromkeys(config.compare))


# every built-in dataset and the kind of data module that reads it (tables are cut into column views, images
# into patches, sequences into feature groups); the data modules take their lists from here, and so does the
# command line's choices for data.dataset
DATASETS = {
    **dict.fromkeys(("wine", "iris", "breast_cancer", "diabetes", "digits", "blob", "boston", "csv"), "table"),
    **dict.fromkeys(("digits_halves", "ascii_blobs", "ascii_blobs20", "ascii_blobs_redundant"), "table"),  # ASCII
    **dict.fromkeys(("dc_artificial", "bank_marketing"), "table"),  # DC, MPDL Table III
    **dict.fromkeys(("mnist", "fashion_mnist", "cifar10", "mnist_subset", "digits_image"), "image"),
    **dict.fromkeys(("sequence_synthetic", "npz"), "sequence"),
}


def datasets_of(kind: str) -> tuple[str, ...]:
    """The built-in datasets read as ``kind`` (``table``, ``image``, ``sequence``)."""
    return tuple(name for name, k in DATASETS.items() if k == kind)
