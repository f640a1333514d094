"""Each CSV organization's own preparation of its columns: text categories one-hot encoded and missing
values imputed, fitted with scikit-learn on that organization's training rows only (``categorical:
onehot``, ``missing: impute``; ``missing: drop`` acts earlier, when the rows are aligned). Nothing about one
organization's columns reaches another's: each group is prepared alone, as its own party would.
"""

from __future__ import annotations

import numpy as np

from vcl.errors import VCLInputError


def prepare_group(block: np.ndarray, kinds: list[str], names: list[str], missing: str, train: np.ndarray):
    """One organization's columns (an object array; NaN for a missing cell) as numbers: numeric columns (mean-
    imputed if ``missing`` is impute), then each text column's categories seen in the training rows as 0/1
    columns named ``column=value`` (a category unseen there encodes as zeros). Returns (float64 array, names)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    numeric = [j for j, k in enumerate(kinds) if k == "numeric"]
    text = [j for j, k in enumerate(kinds) if k == "categorical"]
    impute = missing == "impute"
    parts = []
    if numeric:
        parts.append(("numeric", SimpleImputer(strategy="mean") if impute else "passthrough", numeric))
    if text:
        fill = SimpleImputer(strategy="most_frequent", missing_values=np.nan)
        encoder = OneHotEncoder(handle_unknown="ignore", sparse_output=False)
        parts.append(("text", make_pipeline(fill, encoder) if impute else encoder, text))
    columns = ColumnTransformer(parts, sparse_threshold=0.0)
    block = block.copy()
    block[:, numeric] = block[:, numeric].astype(np.float64)
    for j in range(block.shape[1]):
        if all(v is None or isinstance(v, float) and np.isnan(v) for v in block[train, j]):
            raise VCLInputError(
                f"column {names[j]!r} has no value in its organization's training rows, so missing: impute has "
                "nothing to impute from; fill some in or remove the column."
            )
    columns.fit(block[train])
    out = np.asarray(columns.transform(block), dtype=np.float64)
    encoded = []
    if text:
        fitted = columns.named_transformers_["text"]
        categories = (fitted[-1] if impute else fitted).categories_
        encoded = [f"{names[j]}={v}" for j, cats in zip(text, categories, strict=True) for v in cats]
    return out, [names[j] for j in numeric] + encoded
