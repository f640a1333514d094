"""The experimenter of DC analysis and MPDL: the party that scores a run from outside it. It holds the raw data a score
needs (full rows, the raw features of the rows one party lacks) and receives the kept models and the parties' reports;
its messages are kept but are not the protocol's communication (the families name it in their ``outside``,
:attr:`vcl.family.Family.outside`)."""

from __future__ import annotations

from vcl.family import Party

EXPERIMENTER = "experimenter"


class Experimenter(Party):
    """It computes on the CPU and keeps no state of its own unless a subclass says so (:class:`vcl.family.Party`'s
    defaults)."""

    name = EXPERIMENTER
