"""What a party loads and makes in its own process (a Ray actor, a gRPC party process): its part of the data, read
where it runs from its own copy of the run's config, and its party, made by its family. Nothing of Alice's side runs
here: a party's process imports no module of the coordinator's (``tests/test_imports.py``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from vcl.config import RunConfig
from vcl.datamodules.reading import file_version, string_array
from vcl.datamodules.tabular import FeatureView, VerticalData, hollow
from vcl.family import family_of


def own_party(config: RunConfig, method: str, index: int, ids, kind: str, num_classes: int):
    """Party ``index`` of ``method``, made in its own process from the config: the whole data set, of which it keeps
    its part, where its family says so (``party_loads_all_data``: the experimenter keeps everything), else its own
    view alone (:func:`party_data`)."""
    family = family_of(config, method)
    if family.party_loads_all_data:
        dm = family.datamodule(config)
        dm.setup()
        data = dm.data
    else:
        data = party_data(config, method, index, ids, kind, num_classes)
    return family.parties(config, method, data, only=index)[0]


_LAST_LOADED: list = []  # the CSV data this process loaded last, as a party: [(its key, its IDs, the data)]


def party_data(config: RunConfig, method: str, index: int, ids, kind: str, num_classes: int) -> VerticalData:
    """What party ``index`` loads in its own process: its own view (every view for Joint), no labels. A CSV party set
    up again for a run of the same config on the same rows (a ``--compare`` method) takes the data it loaded for the
    run before, unless its file changed meanwhile."""
    family = family_of(config, method)
    everything = method in family.joint_methods
    kept = isinstance(ids, dict) and ids.get("kept") is not None  # a finished run's party: no training file read
    if config.data.dataset == "csv" and not everything:
        key = None if kept else _loaded_key(config, index, kind, num_classes)
        if _LAST_LOADED and _LAST_LOADED[0][0] == key and _same_ids(_LAST_LOADED[0][1], ids):
            return _own_splits(_LAST_LOADED[0][2])
        _LAST_LOADED.clear()
        dm = family.datamodule(config, only=index, ids=ids)
        dm.setup()
        views = [FeatureView(Path(f).stem, [], {}) for f in config.data.csv_files]
        views[index] = dm.data.views[0]
        data = VerticalData(views, {}, kind, num_classes, new_ids=dm.data.new_ids)
        if not kept:
            _LAST_LOADED.append((key, ids, data))
        return _own_splits(data)
    dm = family.datamodule(config, ids=ids) if config.data.dataset == "csv" else family.datamodule(config)
    dm.setup()
    data = dm.data
    views = [v if everything or m == index else hollow(v) for m, v in enumerate(data.views)]
    return VerticalData(views, {}, kind, num_classes, joint=data.joint if everything else None)


def _loaded_key(config: RunConfig, index: int, kind: str, num_classes: int) -> str:
    """What a CSV party's data follow from: the whole config, its place, the task, and its files' versions."""

    d = config.data
    files = [d.csv_files[index], *(d.predict_files[index : index + 1] if d.predict_files else [])]
    versions = [file_version(Path(f)) for f in files]
    return json.dumps([config.to_dict(), index, kind, num_classes, versions], sort_keys=True, default=str)


def _same_ids(a, b) -> bool:
    """Whether two alignments a party was sent name the same rows (IDs as Arrow arrays or lists; dicts of them)."""

    if isinstance(a, dict) or isinstance(b, dict):
        both = isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
        return both and all(_same_ids(a[k], b[k]) for k in a)
    if a is None or b is None:
        return a is b
    return string_array(a).equals(string_array(b))


def _own_splits(data: VerticalData) -> VerticalData:
    """``data`` with each view's splits in a dict of its own (a run may add a split, ``new``; the tensors are shared,
    and nothing writes into them)."""
    return replace(data, views=[replace(v, splits=dict(v.splits)) for v in data.views])
