"""Protocols run at Alice: GAL (and its AL / Alone / Joint configurations), Late and Interm fusion, ASCII."""

from vcl.protocols.ascii import ASCIIOptions, AssistedClassification, IgnoranceAgent
from vcl.protocols.base import Protocol
from vcl.protocols.gal import GALOptions, GradientAssistedLearning
from vcl.protocols.interm import IntermFusion
from vcl.protocols.late import LateFusion

__all__ = [
    "ASCIIOptions",
    "AssistedClassification",
    "IgnoranceAgent",
    "GALOptions",
    "GradientAssistedLearning",
    "IntermFusion",
    "LateFusion",
    "Protocol",
]
