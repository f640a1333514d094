"""Every method vcl runs, in one pure table (no torch, no Ray, no devices) the command line reads without
importing anything else: :data:`FAMILIES` (each family's class path, imported only when a run uses it) and
:data:`METHODS` (each method's family). A family outside vcl needs no line (:mod:`vcl.family`)."""

from __future__ import annotations

import re

# a family outside vcl, named by its class: my_pkg.module.Class or my_pkg.module:Class
CLASS_PATH = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*[.:][A-Za-z_]\w*$")

FAMILIES = {
    "GAL": "vcl.methods.gal:GAL",
    "ASCII": "vcl.methods.ascii:ASCII",
    "DC": "vcl.methods.dc:DC",
    "MPDL": "vcl.methods.mpdl:MPDL",
}

# transport.kind: its class (vcl.transport.Transport, the contract); a transport outside vcl is named by its class path
TRANSPORTS = {
    "local": "vcl.transports.local:LocalTransport",
    "ray": "vcl.transports.ray:RayTransport",
    "grpc": "vcl.transports.grpc:GrpcTransport",
}

# method: its family
METHODS = {
    "gal": "GAL",
    "alone": "GAL",
    "joint": "GAL",
    "al": "GAL",
    "late": "GAL",
    "interm": "GAL",
    "ascii": "ASCII",
    "ascii_simple": "ASCII",
    "ascii_random": "ASCII",
    "ensemble_adaboost": "ASCII",
    "single": "ASCII",
    "oracle": "ASCII",
    "dc_smote": "DC",
    "dc_tsvd": "DC",
    "dc_rand": "DC",
    "dc_raw": "DC",
    "centralized": "DC",
    "local": "DC",
    "mpdl": "MPDL",
    "ftl": "MPDL",
}


def is_class_path(method: str) -> bool:
    """Whether ``method`` names a family outside the registry (``my_pkg.MyMethod``) rather than a registered method."""
    return method not in METHODS and bool(CLASS_PATH.match(method))


# every built-in dataset and the kind of data module that reads it (tables are cut into column views, images
# into patches, sequences into feature groups); the data modules take their lists from here, and so does the
# command line's choices for data.dataset
DATASETS = {
    **dict.fromkeys(("wine", "iris", "breast_cancer", "diabetes", "digits", "blob", "boston", "csv"), "table"),
    **dict.fromkeys(("digits_halves", "ascii_blobs", "ascii_blobs20", "ascii_blobs_redundant"), "table"),  # ASCII
    "fashion_mnist_halves": "table",  # ASCII Fig. 4b/5: Fashion-MNIST's images cut in halves, a column each pixel
    "ascii_blobs9": "table",  # ASCII Fig. 1's toy
    **dict.fromkeys(("dc_artificial", "bank_marketing"), "table"),  # DC, MPDL Table III
    **dict.fromkeys(("mnist", "fashion_mnist", "cifar10", "mnist_subset", "digits_image"), "image"),
    **dict.fromkeys(("sequence_synthetic", "npz"), "sequence"),
}


def datasets_of(kind: str) -> tuple[str, ...]:
    """The built-in datasets read as ``kind`` (``table``, ``image``, ``sequence``)."""
    return tuple(name for name, k in DATASETS.items() if k == kind)
