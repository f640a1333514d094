"""LightningDataModules that split one dataset into per-organization views: table columns, image
patches, sequence feature groups, c × d parties (DC), or two partly overlapping parties (MPDL)."""

from datamodules.grid import GridData, GridDataModule
from datamodules.image import IMAGE_DATASETS, ImageDataModule, patch_boxes, patch_grid, split_image_views
from datamodules.overlap import OverlapData, OverlapDataModule
from datamodules.sequence import SEQUENCE_DATASETS, SequenceDataModule, synthetic_sequences
from datamodules.sources import DATASETS, Table, load_table
from datamodules.tabular import TabularDataModule, VerticalData, named_column_split, random_column_split

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
