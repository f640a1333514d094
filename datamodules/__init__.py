"""Data modules that split one dataset into per-organization views: table columns, image
patches, sequence feature groups, c × d parties (DC), or two partly overlapping parties (MPDL)."""

from vcl.datamodules.grid import GridData, GridDataModule
from vcl.datamodules.image import IMAGE_DATASETS, ImageDataModule, patch_boxes, patch_grid, split_image_views
from vcl.datamodules.overlap import OverlapData, OverlapDataModule
from vcl.datamodules.sequence import SEQUENCE_DATASETS, SequenceDataModule, synthetic_sequences
from vcl.datamodules.sources import DATASETS, Table, load_table
from vcl.datamodules.tabular import TabularDataModule, VerticalData, named_column_split, random_column_split

__all__ = [
    "DATASETS",
    "GridData",
    "GridDataModule",
    "IMAGE_DATASETS",
    "SEQUENCE_DATASETS",
    "ImageDataModule",
    "OverlapData",
    "OverlapDataModule",
    "SequenceDataModule",
    "Table",
    "TabularDataModule",
    "VerticalData",
    "load_table",
    "named_column_split",
    "patch_boxes",
    "patch_grid",
    "random_column_split",
    "split_image_views",
    "synthetic_sequences",
]
