"""Protocols: GAL (and its AL / Alone / Joint configurations), Late and Interm fusion and ASCII, run at
Alice; DC analysis (and its Centralized / Local references), run at the DC master; MPDL (and its FTL
reference) between two partly overlapping parties and a collaborator."""

from vcl.protocols.ascii import ASCIIOptions, AssistedClassification, IgnoranceAgent
from vcl.protocols.base import Protocol
from vcl.protocols.dc import Centralized, DataCollaboration, Local
from vcl.protocols.gal import GALOptions, GradientAssistedLearning
from vcl.protocols.interm import IntermFusion
from vcl.protocols.late import LateFusion
from vcl.protocols.mpdl import FederatedTransfer, MPDLOptions, MultiPartyDualLearning

__all__ = [
    "ASCIIOptions",
    "AssistedClassification",
    "Centralized",
    "DataCollaboration",
    "FederatedTransfer",
    "GALOptions",
    "GradientAssistedLearning",
    "IgnoranceAgent",
    "IntermFusion",
    "LateFusion",
    "Local",
    "MPDLOptions",
    "MultiPartyDualLearning",
    "Protocol",
]
