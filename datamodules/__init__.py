"""LightningDataModules that split one dataset into per-organization views (vertical, or c × d for DC)."""

from datamodules.grid import GridData, GridDataModule
from datamodules.sources import DATASETS, Table, load_table
from datamodules.tabular import TabularDataModule, VerticalData, named_column_split, random_column_split

__all__ = [
    "DATASETS",
    "GridData",
    "GridDataModule",
    "Table",
    "TabularDataModule",
    "VerticalData",
    "load_table",
    "named_column_split",
    "random_column_split",
]
