"""Protocols run at Alice: GAL (and its AL / Alone / Joint configurations) and Late fusion."""

from vcl.protocols.base import Protocol
from vcl.protocols.gal import GALOptions, GradientAssistedLearning
from vcl.protocols.late import LateFusion

__all__ = ["GALOptions", "GradientAssistedLearning", "LateFusion", "Protocol"]
