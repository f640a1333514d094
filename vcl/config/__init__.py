"""Run configuration: typed option groups, read by jsonargparse from YAML files and command-line flags
(defaults < ``--config FILE`` < the flags after it); each option's docstring is its ``--help``. This module imports
no torch: ``train.py --help`` needs none."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
import unicodedata
from argparse import ArgumentError
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal, Union

from vcl.config.families import GROUPS, ASCIIGroup, DCGroup, GALGroup, MPDLGroup  # from vcl.config import GALGroup
from vcl.config.files import _flag_yaml, read_yaml
from vcl.config.groups import (
    FLOAT32_MAX,
    FLOAT32_TINY,
    NOT_IDENTITY,
    DataGroup,
    LearnerGroup,
    Method,
    RunGroup,
    TransportGroup,
    listed,
)
from vcl.errors import VCLInputError
from vcl.registry import METHODS, is_class_path

__all__ = ["ASCIIGroup", "DCGroup", "DataGroup", "GALGroup", "LearnerGroup", "MPDLGroup", "RunConfig", "RunGroup"]
__all__ += ["TransportGroup", "config_integers", "flatten", "nest", "parse_args", "party_copy", "SECRETS"]


@dataclass
class RunConfig:
    """a vertical collaborative learning run"""

    method: Method | str = "gal"
    """the method to run: one of the registry's, or the class path of a family outside vcl (my_pkg.MyMethod, a
    vcl.family.Family subclass); its family (GAL, ASCII, DC, MPDL, or yours) says which others compare may name"""
    compare: str | list[str] | None = None
    """methods of the same family also run, their metrics beside the main one's ([] for none; unset: the
    family's reference of one party alone: alone beside GAL, single beside ASCII, local beside DC, ftl beside MPDL)"""
    options: dict = field(default_factory=dict)
    """the options of a family outside vcl (its Family.options dataclass's fields; the built-in families have their
    groups below)"""
    out: str = ""
    """run directory (default runs/<method>_<dataset>_M<M>_seed<seed>; DC: _<c>x<d>_)"""
    data: DataGroup = field(default_factory=DataGroup)
    run: RunGroup = field(default_factory=RunGroup)
    learner: LearnerGroup = field(default_factory=LearnerGroup)
    transport: TransportGroup = field(default_factory=TransportGroup)
    gal: GALGroup = field(default_factory=GALGroup)
    ascii: ASCIIGroup = field(default_factory=ASCIIGroup)
    dc: DCGroup = field(default_factory=DCGroup)
    mpdl: MPDLGroup = field(default_factory=MPDLGroup)

    def __post_init__(self):
        if self.method not in METHODS and not is_class_path(self.method):
            raise VCLInputError(
                f"method={self.method!r} is neither one of vcl's methods ({', '.join(METHODS)}) nor a family's class "
                "path (my_pkg.MyMethod); name one of them."
            )
        for key, value in flatten(dataclasses.asdict(self)).items():
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, float) and not (math.isfinite(v) and abs(v) <= FLOAT32_MAX):
                    raise VCLInputError(
                        f"{key}={v} is not a finite number within float32's range (up to 3.4e38); give a smaller one."
                    )
                if isinstance(v, float) and 0 < abs(v) < FLOAT32_TINY:
                    raise VCLInputError(f"{key}={v} is too close to 0 for float32 (below 1.2e-38); give a larger one.")
        if self.compare is not None:
            listed(self, "compare")

    # --- loading ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> RunConfig:
        """A config from nested groups (``{"gal": {"weights": "bag"}}``), dotted keys (``{"gal.weights": "bag"}``)
        or both; what is not given keeps its default. Types are checked as the command line checks them."""
        return from_namespace(parse_object(nest(values), source))

    @classmethod
    def from_yaml(cls, path: str | Path) -> RunConfig:
        return cls.from_dict(read_yaml(path), source=str(path))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def flat(self) -> dict:
        """Every option under its dotted name (``gal.weights``)."""
        return flatten(self.to_dict())

    @property
    def run_dir(self) -> Path:
        if METHODS.get(self.method) == "DC":
            parties = f"{self.dc.row_groups}x{self.dc.column_groups}"
        else:
            parties = f"M{self.data.organizations}"
        dataset = self.data.dataset
        if self.data.module:  # the user's data module's class name
            dataset = self.data.module.partition("{")[0].rpartition(".")[2]
        return Path(self.out or f"runs/{self.method}_{dataset}_{parties}_seed{self.run.seed}")

    def identity(self) -> dict:
        """The settings a resumed run must share with its checkpoint (all but where/how long/how shown), those set
        to other than their defaults only: an option added later, with its default, changes no earlier run's."""
        defaults = default_flat()
        return {
            k: v
            for k, v in self.flat().items()
            if not any(k == skip or k.startswith(skip + ".") for skip in NOT_IDENTITY)
            and v != defaults.get(k, object())
        }


def identity_differs(kept: dict, now: dict) -> list[str]:
    """The options in which a checkpoint's identity (``kept``; one that lists every option, from before identities
    left defaults out, too) and this config's (``now``) differ: an option absent from one holds its default."""
    defaults = default_flat()
    missing = object()
    return sorted(
        k for k in set(kept) | set(now) if kept.get(k, defaults.get(k, missing)) != now.get(k, defaults.get(k, missing))
    )


@lru_cache(maxsize=1)
def default_flat() -> dict:
    """Every option's default under its dotted name."""
    return flatten(dataclasses.asdict(RunConfig()))


# each party's own seeds, and who holds them (None: the coordinator, Alice in GAL); every other party's copy of the
# config has them zeroed
SECRETS = {"gal.privacy_secret": None, "mpdl.secret_a": "a", "mpdl.secret_b": "b"}


def party_copy(settings: dict, party: str | None = None) -> dict:
    """The config (as ``RunConfig.to_dict`` gives it) that ``party`` may hold: every secret but its own zeroed
    (``party=None``: a copy that holds none)."""
    settings = {k: dict(v) if isinstance(v, dict) else v for k, v in settings.items()}
    for key, holder in SECRETS.items():
        group, _, name = key.partition(".")
        if holder is None or holder != party:
            settings[group][name] = 0
    return settings


def config_integers(settings) -> tuple[int, ...]:
    """Every whole number in a config (as ``to_dict`` gives it), once, in order: the seeds a party could derive
    anything from (what an attack on protective noise tries)."""
    found: list[int] = []
    stack = [settings]
    while stack:
        value = stack.pop(0)
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            found.append(value)
    return tuple(dict.fromkeys(found))


def flatten(values: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in values.items():
        if k in GROUPS and not prefix and isinstance(v, dict):
            out.update(flatten(v, f"{k}."))
        else:
            out[prefix + k] = v
    return out


def nest(values: dict) -> dict:
    """Dotted keys into their groups (``gal.weights`` → ``{"gal": {"weights": ...}}``), merged with nested ones."""
    out: dict = {}
    for key, value in values.items():
        if isinstance(value, dict) and key in GROUPS:
            out.setdefault(key, {}).update(value)
        elif "." in key:
            group, name = key.split(".", 1)
            out.setdefault(group, {})[name] = value
        else:
            out[key] = value
    return out


# --- the parser (jsonargparse) ------------------------------------------------------------------------------


@lru_cache(maxsize=2)
def parser(documented: bool = False):
    """The command line: every option of :class:`RunConfig`, ``--config`` and ``--print_config``; train.py takes its
    switches off first. ``documented``: each option's help from its docstring (for ``--help`` only: it is slow)."""
    import jsonargparse
    import yaml
    from jsonargparse import ActionConfigFile, ArgumentParser

    jsonargparse.set_parsing_settings(docstring_parse_attribute_docstrings=documented)
    jsonargparse.set_loader("vcl_yaml", _flag_yaml, exceptions=(yaml.YAMLError,))
    p = ArgumentParser(
        parser_mode="vcl_yaml",
        prog="train.py",
        description="Train a vertical collaborative learning method (default: GAL on wine, M=8).",
        epilog="Switches (not part of a config): --resume continues the run in --out from its last checkpoint; "
        "--overwrite starts afresh in an --out that holds a run (its outputs are replaced once the new run completes; "
        "other files are kept); "
        "--quiet prints only the final summary.",
        exit_on_error=False,
    )
    p.add_argument(
        "--config", action=ActionConfigFile, help="a YAML file of options (see configs/); flags after it override it"
    )
    p.add_class_arguments(RunConfig, fail_untyped=True, sub_configs=False)
    return p


@lru_cache(maxsize=1)
def _defaults():
    return parser().get_defaults()


def warm_parser() -> None:
    """The parser and its defaults built now (a long-running party, before it listens), not at the first parse."""
    _defaults()


def parse_object(values: dict, source: str):
    """Nested values checked against the options' types, defaults filled in: a jsonargparse Namespace."""

    try:  # onto a copy of the defaults parsed once: 40 % less time than parsing them again each call
        return parser().parse_object(values, namespace=_defaults().clone(), defaults=False)
    except ArgumentError as err:
        raise VCLInputError(explain(str(err), source)) from None


def parse_args(argv: list[str]) -> RunConfig:
    """The command line parsed, or a :class:`VCLInputError` naming the flag and the fix."""

    argv = _gather_lists(argv)
    for k, arg in enumerate(argv):  # a config file's own problems, said as for one loaded in code
        if arg == "--config" and k + 1 < len(argv) or arg.startswith("--config="):
            path = argv[k + 1] if arg == "--config" else arg.split("=", 1)[1]
            parse_object(nest(read_yaml(path)), path)
    try:
        documented = any(a in ("-h", "--help") or a.startswith("--print_config=comments") for a in argv)
        ns = parser(documented).parse_args(argv)
    except ArgumentError as err:
        raise VCLInputError(explain(str(err), "command line")) from None
    return from_namespace(ns)


def _list_options() -> dict[str, bool]:
    """Options that hold a list, by flag: True where a single value is a list too (``list[X]``), False where it
    means one value for all (``X | list[X]``)."""

    out = {}
    for prefix, cls in [("", RunConfig), *((f"{g}.", c) for g, c in GROUPS.items())]:
        for name, hint in typing.get_type_hints(cls).items():
            args = typing.get_args(hint)
            if typing.get_origin(hint) is list:
                out[f"--{prefix}{name}"] = True
            elif typing.get_origin(hint) in (Union, types.UnionType) and list in map(typing.get_origin, args):
                out[f"--{prefix}{name}"] = False
    return out


def _gather_lists(argv: list[str]) -> list[str]:
    """``--compare alone late`` as ``--compare '[alone, late]'`` and a bare ``--compare`` as ``[]``: list options
    take the values after them, up to the next flag, as the old command line did."""

    lists, out, k = _list_options(), [], 0
    while k < len(argv):
        arg = argv[k]
        out.append(arg)
        k += 1
        if arg not in lists:
            continue
        values = []
        while k < len(argv) and not argv[k].startswith("--"):
            values.append(argv[k])
            k += 1
        if len(values) == 1 and (values[0].lstrip().startswith("[") or not lists[arg]):
            out.append(values[0])  # a list written out, or one value for all
        else:
            out.append("[" + ", ".join(_scalar(v, json) for v in values) + "]")
    return out


def _scalar(text: str, json) -> str:
    """A command-line value inside a YAML list: numbers as written, anything else quoted (``#``, ``:`` and
    ``yes`` stay text)."""
    try:
        float(text)
        return text
    except ValueError:
        return json.dumps(text)


def from_namespace(ns) -> RunConfig:
    values = _plain(ns.as_dict())
    groups = {k: GROUPS[k](**values.pop(k)) for k in GROUPS}
    return RunConfig(**{k: values[k] for k in ("method", "compare", "out")}, **groups)


def _plain(value):
    """Bounded numbers back to plain ones (a checkpoint holds only built-in types)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def explain(message: str, source: str) -> str:
    """jsonargparse's error as one sentence that names the option and what it takes."""
    first = message.strip().splitlines()[0].strip()
    key = re.search(r'[Kk]ey "([^"]+)"', message)
    if key:
        name = key.group(1)
        if name in GROUPS:
            return f"{source}: {name} is a group of options; set them one by one, e.g. --{name}.<option>."
        got = (
            re.search(r"(?:Got|Given) value: (.+)", message)
            or re.search(r": (\S+) does not conform", message)
            or re.search(r"invalid literal for \w+\(\) with base 10: '(.*)'", message)
        )
        value = f"={got.group(1).strip()}" if got else ""
        wants = _wants(name)
        if value in ("=True", "=False", "=None") and wants.endswith("text"):
            wants += " (quote it: YAML reads yes, no and null as true, false and null)"
        return f"{source}: {name}{value} is not valid; {wants}."
    for pattern in (
        r"Group '(\w+)' does not accept (?:option|nested key) '([^']+)'",
        r"Option '([^']+)' is not accepted",
        r"nrecognized arguments: --(\S+)",
    ):
        found = re.search(pattern, first)
        if found:
            return _unknown(source, ".".join(found.groups()))
    return f"{source}: {first.rstrip('.')}; see `python train.py --help` for the options."


def _unknown(source: str, name: str) -> str:
    """An unknown option, with the option of that name in its group when there is one (``seed`` → ``run.seed``,
    ``dc_dim`` → ``dc.dim``); a name with characters that do not show (a zero-width space) is shown escaped."""

    if any(unicodedata.category(c) in ("Cc", "Cf", "Cn", "Co", "Zl", "Zp", "Zs") for c in name):
        return f"{source}: unknown option {ascii(name)} (it holds characters that do not show); retype it."
    last = name.rsplit(".", 1)[-1]
    for group, cls in GROUPS.items():
        for f in dataclasses.fields(cls):
            if last in (f.name, f"{group}_{f.name}"):
                return f"{source}: unknown option {name}; did you mean {group}.{f.name}?"
    return f"{source}: unknown option {name}; see `python train.py --help` for the options."


def _wants(name: str) -> str:
    """What an option takes, from its type."""

    cls, parts = RunConfig, name.split(".")
    for part in parts[:-1]:
        cls = GROUPS.get(part, cls)
    hint = typing.get_type_hints(cls).get(parts[-1])
    return "it takes " + _describe(hint) if hint is not None else "see `python train.py --help` for what it takes"


def _describe(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return "one of " + ", ".join(str(a) if a != "" else "'' (empty)" for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is list:
        return f"a list of {_describe(args[0]) if args else 'values'}"
    if origin is dict:
        return "a mapping such as {name: [column, ...]}"
    names = {
        "PositiveInt": "a whole number > 0",
        "NonNegativeInt": "a whole number >= 0",
        "PositiveFloat": "a number > 0",
        "NonNegativeFloat": "a number >= 0",
        "OpenUnitInterval": "a number strictly between 0 and 1",
        "int": "a whole number",
        "float": "a number",
        "bool": "true or false",
        "str": "text",
    }
    return names.get(getattr(hint, "__name__", ""), str(hint))
