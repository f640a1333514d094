"""Multi-party dual learning (MPDL, Algorithm 1 with Algorithm 2 inside) and the FTL reference.

The collaborator C (the coordinator) asks A and B for each step (:class:`~vcl.messages.Step`; minibatch schedules
come from the run seed); A and B exchange Algorithm 2's messages through the transport. A round: the dual models on
D_C (:mod:`.dual`); B completes its B-only rows (D_P) for A; the central split models (:mod:`vcl.engine.split_network`)
M_C and M_D fitted afresh and scored V_C, V_D; stop when V_D − V_C > T, then refit on all of D_C (∪ D_P). The
experimenter (:class:`OverlapExperimenter`) scores the attacks; FTL_A: :class:`FederatedTransfer`. See docs/mpdl.md."""

from __future__ import annotations

from dataclasses import replace

from vcl.config import RunConfig, config_integers, party_copy
from vcl.config.resolve import shared_data_options
from vcl.datamodules.image import IMAGE_DATASETS
from vcl.datamodules.overlap import OverlapData, OverlapDataModule
from vcl.engine.split_network import ActivationGradient, Activations
from vcl.errors import VCLInputError
from vcl.family import Family
from vcl.methods.experimenter import EXPERIMENTER
from vcl.methods.mpdl.blinding import BlindedIDs, FoldAssignment, IntersectionIndices
from vcl.methods.mpdl.dual import (
    CrossGradient,
    DensityDifference,
    GeneratedData,
    OutputGradient,
    PerturbedMeans,
    PublicKey,
)
from vcl.methods.mpdl.experimenter import OverlapExperimenter
from vcl.methods.mpdl.messages import Report
from vcl.methods.mpdl.options import options_of
from vcl.methods.mpdl.paillier import check_key_bits
from vcl.methods.mpdl.party import OverlapParty


class MPDL(Family):
    """The MPDL family: multi-party dual learning and its FTL reference, between A, B (partly overlapping rows) and
    the collaborator C, with the experimenter scoring."""

    name = "MPDL"
    methods = ("mpdl", "ftl")
    reference = "ftl"
    messages = (PublicKey, PerturbedMeans, GeneratedData, OutputGradient, DensityDifference, CrossGradient, Report)
    auditor = "vcl.methods.mpdl.audit"  # its attacks on what its receivers kept (docs/privacy.md)
    messages += (BlindedIDs, IntersectionIndices, FoldAssignment, Activations, ActivationGradient)  # + split network
    peer_messages = (BlindedIDs, IntersectionIndices, FoldAssignment, PublicKey, PerturbedMeans, GeneratedData)
    peer_messages += (OutputGradient, DensityDifference, CrossGradient, Activations, Report)  # A ↔ B, → experimenter
    party_loads_all_data = True
    outside = (EXPERIMENTER,)  # it scores the run; its messages are not the protocol's communication

    def alice_data(self, data: OverlapData) -> OverlapData:
        """C's view, where A and B run apart: each party's width and image layout, labels for the metrics."""
        a, b = (replace(d, ids=[], train=d.train[:0], test=d.test[:0]) for d in (data.a, data.b))
        return replace(data, a=a, b=b, truth={"a_only_labels": data.truth["a_only_labels"]})

    def datamodule(self, config: RunConfig, only: int | None = None, ids: list[str] | None = None) -> OverlapDataModule:
        """Two parties whose rows partly overlap (γ of them in common), with the labels at B."""
        d = config.data
        return OverlapDataModule(
            **shared_data_options(config),
            gamma=config.mpdl.gamma,
            seed=config.run.seed,
            assignment=d.assignment or None,
            root=d.root,
            max_rows=config.mpdl.max_rows,
        )

    def parties(self, config: RunConfig, method: str, data: OverlapData, only: int | None = None, plan=None) -> list:
        """A, B and the experimenter (every one, or only ``only``: what a party's own process builds)."""
        options, seed, k, dual = options_of(config), config.run.seed, data.num_classes, method == "mpdl"
        makers = [
            lambda: OverlapParty(data.a, data.b, options, seed, k, dual),
            lambda: OverlapParty(data.b, data.a, options, seed, k, dual),
            lambda: OverlapExperimenter(data, options, k, config_integers(party_copy(config.to_dict()))),
        ]
        return [make() for i, make in enumerate(makers) if only is None or i == only]

    def build(self, config: RunConfig, data: OverlapData, method: str):
        """Alice's side, the collaborator C (:mod:`vcl.methods.mpdl.coordinator`), imported here only: a party's own
        process loads the family without it."""
        from vcl.methods.mpdl.coordinator import build

        return build(config, data, method, self)

    def check(self, config: RunConfig) -> None:
        """A CNN central or dual model needs images; Paillier's key is a size it can use."""
        for key in ("central", "dual_arch"):
            if getattr(config.mpdl, key) == "cnn" and config.data.dataset not in IMAGE_DATASETS:
                raise VCLInputError(
                    f"mpdl.{key}=cnn needs an image dataset ({', '.join(IMAGE_DATASETS)}), not {config.data.dataset!r}."
                )
        check_key_bits(config.mpdl.key_bits)
