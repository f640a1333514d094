"""LightningDataModules that split one dataset into per-organization views."""

from datamodules.sources import DATASETS, Table, load_table
from datamodules.tabular import TabularDataModule, VerticalData, named_column_split, random_column_split

__all__ = [
    "DATASETS",
    "Table",
    "TabularDataModule",
    "VerticalData",
    "load_table",
    "named_column_split",
    "random_column_split",
]
