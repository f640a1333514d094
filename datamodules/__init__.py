"""LightningDataModules that split one dataset into per-party views — table columns, image patches, sequence
feature groups, one CSV per organization, c × d parties (DC), or two partly overlapping parties (MPDL) — each
view a LightningDataModule of its own (:class:`PartyDataModule`).

The names below are imported on first use (PEP 562): reading an organization's files
(:mod:`vcl.datamodules.csv_files`, Arrow and NumPy only) need not wait for torch and Lightning, so the command line
reads them while it imports those (``train.py``, :func:`vcl.datamodules.csv_files.read_ahead`)."""

from __future__ import annotations

import importlib

_WHERE = {
    "GridData": "grid",
    "GridDataModule": "grid",
    "IMAGE_DATASETS": "image",
    "ImageDataModule": "image",
    "patch_boxes": "image",
    "patch_grid": "image",
    "split_image_views": "image",
    "OverlapData": "overlap",
    "OverlapDataModule": "overlap",
    "PartyDataModule": "view",
    "label_targets": "view",
    "SEQUENCE_DATASETS": "sequence",
    "SequenceDataModule": "sequence",
    "synthetic_sequences": "sequence",
    "DATASETS": "sources",
    "load_table": "sources",
    "Table": "table",
    "TabularDataModule": "tabular",
    "VerticalData": "tabular",
    "VerticalDataModule": "tabular",
    "named_column_split": "tabular",
    "random_column_split": "tabular",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
