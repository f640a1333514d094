"""Interpretable Data Collaboration (DC) analysis (SMOTE-anchor paper, Algorithm 1) and its references.

c × d workers, in one shot: the anchor (:mod:`vcl.methods.dc.anchors`), the reduced rows to the master
(:class:`ReducedRepresentation`), its anchor predictions back, each worker's interpretable model. Centralized and
Local are the references, scored by :class:`Evaluation`. Step by step: docs/dc.md."""

from __future__ import annotations

from dataclasses import replace

import torch

from vcl.config import RunConfig
from vcl.config.resolve import shared_data_options
from vcl.datamodules.grid import GridData, GridDataModule
from vcl.datamodules.tabular import hollow
from vcl.errors import VCLInputError
from vcl.family import Family, methods_of
from vcl.methods.dc.anchors import GridLayout, make_anchor_construction
from vcl.methods.dc.experimenter import DCExperimenter, Evaluation
from vcl.methods.dc.messages import (
    AnchorPredictions,
    AnchorShare,
    KeptModel,
    RawFeatures,
    ReducedRepresentation,
    ScoreRequest,
    Scores,
)
from vcl.methods.dc.models import make_central, make_interpretable, make_reduction
from vcl.methods.dc.options import dc_options
from vcl.methods.dc.party import DCWorker
from vcl.methods.experimenter import EXPERIMENTER


class DC(Family):
    """The DC family: DC analysis with each anchor construction (dc_smote, dc_tsvd, dc_rand, dc_raw) and its
    Centralized / Local references, on c × d workers; the master coordinates, the experimenter scores."""

    name = "DC"
    methods = ("dc_smote", "dc_tsvd", "dc_rand", "dc_raw", "centralized", "local")
    reference = "local"
    messages = (AnchorShare, ReducedRepresentation, AnchorPredictions, RawFeatures, KeptModel, ScoreRequest, Scores)
    auditor = "vcl.methods.dc.audit"  # its attacks on what its receivers kept (docs/privacy.md)
    peer_messages = (AnchorShare, KeptModel)  # a worker's anchor to its row group, its model to the experimenter
    party_loads_all_data = True
    outside = (EXPERIMENTER,)  # it scores the run; its messages are not the protocol's communication

    def alice_data(self, data: GridData) -> GridData:
        """The master's grid of names, where the workers run apart; labels only for round 0's prior and metrics."""
        parties = [[hollow(v) for v in row] for row in data.parties]
        return replace(data, parties=parties, group_labels=[], public=torch.empty(0))

    def datamodule(self, config: RunConfig, only: int | None = None, ids: list[str] | None = None) -> GridDataModule:
        """c × d parties: row groups by column groups, plus the public rows the anchors start from."""
        d, dc = config.data, config.dc
        return GridDataModule(
            **shared_data_options(config),
            row_groups=dc.row_groups,
            column_groups=dc.column_groups,
            feature_split=dc.feature_split,
            public_rows=dc.public_rows,
            seed=config.run.seed,
            standardize=dc.standardize,
            assignment=d.assignment or None,
        )

    def parties(self, config: RunConfig, method: str, data: GridData, only: int | None = None, plan=None) -> list:
        """The c × d workers in row-major order, then the experimenter: every one, or only party ``only``
        (what a party's own process builds from the config, :mod:`vcl.transports.ray`)."""
        options = dc_options(config, method)
        c = len(data.parties)
        count = c * len(data.column_groups) + 1
        construction = None
        if method.startswith("dc_"):
            construction = make_anchor_construction(
                options.anchor,
                config.dc.anchor_rows,
                config.dc.smote_k,
                config.dc.smote_alpha,
                config.dc.tsvd_rank,
                config.dc.tsvd_delta,
                config.dc.rand_spread,
            )
        layout = GridLayout(c, data.column_groups)
        parties = []
        for k in range(count) if only is None else [only]:
            if k == count - 1:
                evaluation = Evaluation({s: data.full(s) for s in data.labels}, data.labels, options, config.run.seed)
                rows = [row[0].splits["train"].shape[0] for row in data.parties]
                parties.append(DCExperimenter(evaluation, rows, data.num_classes))
                continue
            i, j = divmod(k, len(data.column_groups))
            worker = DCWorker(
                data.parties[i][j],
                (i, j),
                data.column_groups[j],
                data.group_labels[i],
                data.public,
                data.num_classes,
                options,
                config.run.seed,
                construction,
                layout,
            )
            _ = worker.dim  # a party too small for dc_dim fails here, before any work
            parties.append(worker)
        return parties

    def build(self, config: RunConfig, data: GridData, method: str):
        """Alice's side, the master (:mod:`vcl.methods.dc.coordinator`), imported here only: a party's own process
        loads the family without it."""
        from vcl.methods.dc.coordinator import build

        return build(config, data, method, self)

    def check(self, config: RunConfig) -> None:
        """The reduction, the central model and the interpretable model are ones DC knows; SMOTE's neighbours are
        fewer than the public rows."""
        d = config.dc
        if "dc_smote" in methods_of(config) and not 1 <= d.smote_k <= d.public_rows - 1:
            raise VCLInputError(
                f"dc.smote_k={d.smote_k} with dc.public_rows={d.public_rows}; "
                "use 1 <= dc.smote_k <= dc.public_rows - 1."
            )
        make_reduction(config.dc.reduction, 1, 0)
        make_central(config.dc.central, 0)
        make_interpretable(config.dc.interpretable, config.dc.tree_splits, 0)
