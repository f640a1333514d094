"""The user's own vertical data module, named in a config by ``data.module: {class_path, init_args}``
(one-line form ``datamodule:<class_path>{json}``): built fresh from the config, and checked after ``setup()``.
A config that names a class is code its author trusts (:mod:`vcl.models.user`)."""

from __future__ import annotations

from vcl.datamodules.tabular import VerticalData, VerticalDataModule

from vcl.classpath import import_class
from vcl.classpath import parse_spec as parse
from vcl.errors import VCLInputError


def build_datamodule(spec: str, option: str = "data.module"):
    """A fresh data module of the user's: a :class:`vcl.datamodules.VerticalDataModule` whose ``setup()`` sets
    ``self.data`` to a :class:`vcl.datamodules.VerticalData` (checked by :func:`check_vertical`)."""
    path, args = parse(spec, option)
    cls = import_class(path, option, VerticalDataModule, "vertical data module")
    try:
        return cls(**args)
    except TypeError as err:
        raise VCLInputError(f"{option}: {path}(**{args}) fails ({err}); fix its init_args.") from None


def check_vertical(dm, option: str = "data.module") -> None:
    """After ``setup()``: ``dm.data`` is a VerticalData whose views share the labels' rows, split by split."""
    data, name = getattr(dm, "data", None), type(dm).__name__
    if not isinstance(data, VerticalData):
        raise VCLInputError(f"{option}: {name}.setup() left self.data as {type(data).__name__}; set a VerticalData.")
    for split in ("train", "test"):
        if split not in data.labels:
            raise VCLInputError(f"{option}: {name}'s data has no {split!r} labels; give train and test splits.")
    for view in data.views:
        for split, y in data.labels.items():
            x = view.splits.get(split)
            if x is None or x.shape[0] != y.shape[0]:
                rows = None if x is None else x.shape[0]
                raise VCLInputError(
                    f"{option}: {name}'s view {view.name!r} has {rows} rows of split {split!r} for "
                    f"{y.shape[0]} labels; every view needs the labels' rows, in their order."
                )
