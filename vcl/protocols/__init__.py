"""Protocols: GAL (and its AL / Alone / Joint configurations), Late and Interm fusion and ASCII, run at
Alice; DC analysis (and its Centralized / Local references), run at the DC master; MPDL (and its FTL
reference) between two partly overlapping parties and a collaborator.

Each protocol's module is imported when a name from it is first asked for (``from vcl.protocols import
GALOptions``): a GAL run never imports what DC analysis or MPDL need (scikit-learn, SciPy, Paillier)."""

import importlib

_WHERE = {
    "ASCIIOptions": "ascii",
    "AssistedClassification": "ascii",
    "IgnoranceAgent": "ascii",
    "Protocol": "base",
    "Centralized": "dc",
    "DataCollaboration": "dc",
    "Local": "dc",
    "GALOptions": "gal",
    "GradientAssistedLearning": "gal",
    "IntermFusion": "interm",
    "LateFusion": "late",
    "FederatedTransfer": "mpdl",
    "MPDLOptions": "mpdl",
    "MultiPartyDualLearning": "mpdl",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
