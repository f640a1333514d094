"""Each CSV organization's own preparation of its columns: text categories one-hot encoded and missing
values imputed, fitted with scikit-learn on that organization's training rows only (``categorical:
onehot``, ``missing: impute``; ``missing: drop`` acts earlier, when the rows are aligned). Nothing about one
organization's columns reaches another's: each group is prepared alone, as its own party would.
"""

from __future__ import annotations

import numpy as np

from vcl.errors import VCLInputError


def prepare_group(
    block: np.ndarray, kinds: list[str], names: list[str], missing: str, train: np.ndarray, text: dict | None = None
):
    """One organization's columns as numbers: numeric columns (``block``'s, NaN for a missing cell; mean-imputed
    if ``missing`` is impute), then each text column's categories seen in the training rows as 0/1 columns named
    ``column=value`` (a category unseen there encodes as zeros). ``text``: each text column's strings by its
    position in the group (NaN where missing; else ``block``'s own column). Returns (float64 array, names)."""
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import OneHotEncoder

    numeric = [j for j, k in enumerate(kinds) if k == "numeric"]
    cats = [j for j, k in enumerate(kinds) if k == "categorical"]
    text = text if text is not None else {j: block[:, j] for j in cats}
    impute = missing == "impute"
    if impute:
        for j in range(len(kinds)):
            if j in text:
                empty = all(v is None or isinstance(v, float) and np.isnan(v) for v in text[j][train])
            else:
                empty = np.isnan(np.asarray(block[train, j], dtype=np.float64)).all()
            if empty:
                raise VCLInputError(
                    f"column {names[j]!r} has no value in its organization's training rows, so missing: impute has "
                    "nothing to impute from; fill some in or remove the column."
                )
    parts, encoded = [], []
    if numeric:
        values = np.asarray(block[:, numeric], dtype=np.float64)
        if impute:
            values = SimpleImputer(strategy="mean").fit(values[train]).transform(values)
        parts.append(values)
    for j in cats:
        cells = np.asarray(text[j], dtype=object).reshape(-1, 1)
        if impute:
            fill = SimpleImputer(strategy="most_frequent", missing_values=np.nan)
            cells = fill.fit(cells[train]).transform(cells)
        encoder = OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(cells[train])
        parts.append(encoder.transform(cells))
        encoded += [f"{names[j]}={v}" for v in encoder.categories_[0]]
    return np.hstack(parts), [names[j] for j in numeric] + encoded
