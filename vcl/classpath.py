"""Classes a config names by ``{class_path, init_args}``, in the one-line form the options store
(``<kind>:<class_path>{init args as JSON}``, :func:`vcl.config.groups.estimator_spec`): parsing that form, and importing
the class it names. Importing a module runs it, so only a config's author's trusted classes come this way
(:mod:`vcl.models.user`); checkpoints and data never do."""

from __future__ import annotations

import importlib
import json
import re

from vcl.errors import VCLInputError
from vcl.registry import is_class_path

ONE_LINE_CLASS = re.compile(r"^[a-z]+:([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)")


def parse_spec(spec: str, option: str) -> tuple[str, dict]:
    """``sklearn:<path>`` (or ``module:``, ``callback:``, ``datamodule:``) with, optionally, its init args as a JSON
    object after it (the one-line form of ``{class_path, init_args}``): the class path and the args."""
    path = spec.split(":", 1)[1]
    if "{" not in path:
        return path, {}
    path, _, args = path.partition("{")
    try:
        values = json.loads("{" + args)
    except json.JSONDecodeError:
        raise VCLInputError(
            f"{option}={spec!r}: its init args are not a JSON object; give {{class_path, init_args}}."
        ) from None
    return path, values


def import_class(path: str, option: str, base: type, what: str) -> type:
    """The class ``path`` names (``package.module.Class``), which must subclass ``base``."""
    module, _, name = path.rpartition(".")
    if not module:
        raise VCLInputError(f"{option}: class_path {path!r} is not a full path; give package.module.Class.")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise VCLInputError(
            f"{option}: cannot import {path} ({err}); put its package on PYTHONPATH or fix the class_path."
        ) from None
    except (Exception, SystemExit) as err:  # the module's own code failed (or exited) as it was imported
        reason = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200] if str(err).strip() else ''}"
        raise VCLInputError(f"{option}: importing {module} for {path} failed ({reason}); fix that module.") from None
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise VCLInputError(f"{option}: {path} is not a {what}; name a subclass of {base.__module__}.{base.__name__}.")
    return cls


def named_classes(value) -> list[str]:
    """Every class path a config names (``class_path:`` entries, ``<kind>:<path>`` one-line forms whatever their kind
    says, and a method family's class, ``method: my_pkg.MyMethod``), scikit-learn's own classes aside."""
    if isinstance(value, dict):
        own = [value["class_path"]] if isinstance(value.get("class_path"), str) else []
        method = value.get("method")
        if isinstance(method, str) and is_class_path(method):
            own.append(method.replace(":", "."))
        return own + [p for v in value.values() for p in named_classes(v)]
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in named_classes(v)]
    if isinstance(value, str):
        m = ONE_LINE_CLASS.match(value)
        return [m[1]] if m and not m[1].startswith("sklearn.") else []
    return []
