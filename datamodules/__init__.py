"""LightningDataModules that split one dataset into per-party views — table columns, image patches, sequence
feature groups, one CSV per organization, c × d parties (DC), or two partly overlapping parties (MPDL) — each
view a LightningDataModule of its own (:class:`PartyDataModule`)."""

from vcl.datamodules.grid import GridData, GridDataModule
from vcl.datamodules.image import IMAGE_DATASETS, ImageDataModule, patch_boxes, patch_grid, split_image_views
from vcl.datamodules.overlap import OverlapData, OverlapDataModule
from vcl.datamodules.party import PartyDataModule, label_targets
from vcl.datamodules.sequence import SEQUENCE_DATASETS, SequenceDataModule, synthetic_sequences
from vcl.datamodules.sources import DATASETS, load_table
from vcl.datamodules.table import Table
from vcl.datamodules.tabular import (
    TabularDataModule,
    VerticalData,
    VerticalDataModule,
    named_column_split,
    random_column_split,
)

__all__ = [
    "DATASETS",
    "GridData",
    "GridDataModule",
    "IMAGE_DATASETS",
    "SEQUENCE_DATASETS",
    "ImageDataModule",
    "OverlapData",
    "OverlapDataModule",
    "PartyDataModule",
    "SequenceDataModule",
    "Table",
    "TabularDataModule",
    "VerticalData",
    "VerticalDataModule",
    "label_targets",
    "load_table",
    "named_column_split",
    "patch_boxes",
    "patch_grid",
    "random_column_split",
    "split_image_views",
    "synthetic_sequences",
]
