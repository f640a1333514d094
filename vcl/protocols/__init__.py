"""Protocols: GAL (and its AL / Alone / Joint configurations) and Late fusion, run at Alice; DC analysis
(and its Centralized / Local references), run at the DC master."""

from vcl.protocols.base import Protocol
from vcl.protocols.dc import Centralized, DataCollaboration, Local
from vcl.protocols.gal import GALOptions, GradientAssistedLearning
from vcl.protocols.late import LateFusion

__all__ = [
    "Centralized",
    "DataCollaboration",
    "GALOptions",
    "GradientAssistedLearning",
    "LateFusion",
    "Local",
    "Protocol",
]
