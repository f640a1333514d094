#!/usr/bin/env python
"""Where a benchmark runs a paper's figure or table on other settings than the paper states. Each benchmark declares
its experiments beside the settings it runs them with (its ``declare()``): an :class:`Experiment` holds the settings
the paper states (config keys: the data set, rounds, epochs, widths, organizations, the privacy level), the config
values of the benchmark's runs (the same dicts it builds them from; what they leave unset is read where a run reads
it) and a :class:`Departure` for every setting that differs. design.md's list of the benchmarks' departures is built
here from those declarations, with the paper's value and ours of each setting.

    python benchmarks/departures.py           # print the list
    python benchmarks/departures.py --write   # put it in docs/design.md, between its two markers
    python benchmarks/departures.py --check   # exit 1 where design.md's list is not what the declarations give

``tests/test_departures.py`` fails on a setting that differs from the paper's without a departure naming it, and on
a departure naming a setting that agrees with the paper's.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DESIGN = HERE.parent / "docs" / "design.md"
BEGIN = "<!-- the benchmarks' departures: written by benchmarks/departures.py --write -->"
END = "<!-- end of the benchmarks' departures -->"
BENCHMARKS = ("gal_uci", "gal_images", "gal_fig4", "gal_ablations", "ascii", "dc", "mpdl", "mpdl_mnist")
# what a learner takes from learner.* where the config leaves it unset: the paper's value for its architecture
LEARNER = {"learner.epochs": "epochs", "learner.cnn_widths": "widths", "learner.hidden": "hidden",
           "learner.lstm_hidden": "lstm_hidden"}  # fmt: skip


@dataclass(frozen=True)
class Departure:
    """One way a benchmark runs a paper's experiment otherwise: ``settings``, the config keys whose values differ
    from the paper's (none where the paper states no value), and ``text``, what design.md's list says."""

    key: str
    page: str  # the method page that says it, docs/<page>
    text: str
    settings: tuple[str, ...] = ()


@dataclass
class Experiment:
    """A paper's figure or table as a benchmark runs it."""

    paper: str  # GAL, ASCII, MPDL, DC
    where: str  # "Tables 12 and 13"
    command: str  # the benchmark's command that runs it
    stated: dict  # config key -> the paper's value; a set: the values the paper runs (M ∈ {2, 4, 8})
    runs: list  # the benchmark's runs: RunConfigs, or the config values it builds them from
    departures: tuple[Departure, ...] = field(default_factory=tuple)


def read(config, key: str):
    """The value of ``key`` a run of ``config`` takes (a learner's unset value: the paper's for its architecture)."""
    if key in LEARNER:
        from vcl.models import deep_arch

        from vcl.methods.columns import learner_settings

        models = config.learner.model if isinstance(config.learner.model, list) else [config.learner.model]
        arch = deep_arch(str(models[0])) or "mlp"
        return _plain(getattr(learner_settings(config, config.method).resolved(arch), LEARNER[key]))
    value = config
    for part in key.split("."):
        value = getattr(value, part)
    return _plain(value)


def _plain(value):
    return tuple(value) if isinstance(value, list | tuple) else value


def ours(experiment: Experiment) -> dict:
    """Each stated setting's values over the benchmark's runs (a set)."""
    from vcl.config import RunConfig

    configs = [run if isinstance(run, RunConfig) else RunConfig.from_dict(run) for run in experiment.runs]
    return {key: {read(c, key) for c in configs} for key in experiment.stated}


def paper(experiment: Experiment) -> dict:
    """Each stated setting as a set of values."""
    return {k: set(map(_plain, v)) if isinstance(v, set) else {_plain(v)} for k, v in experiment.stated.items()}


def differing(experiment: Experiment) -> list[str]:
    """The stated settings the benchmark's runs take otherwise."""
    held, said = ours(experiment), paper(experiment)
    return [key for key in experiment.stated if held[key] != said[key]]


def undeclared(experiment: Experiment) -> list[str]:
    """The settings that differ from the paper's with no departure of the experiment naming them."""
    named = {k for d in experiment.departures for k in d.settings}
    return [k for k in differing(experiment) if k not in named]


def stale(experiment: Experiment) -> list[str]:
    """``key: setting`` for each setting a departure of the experiment names that the runs take as the paper does."""
    off = differing(experiment)
    return [
        f"{d.key}: {k}" for d in experiment.departures for k in d.settings if k in experiment.stated and k not in off
    ]


def declared() -> list[Experiment]:
    """Every benchmark's experiments, in :data:`BENCHMARKS`' order."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    return [e for name in BENCHMARKS for e in importlib.import_module(name).declare()]


def _show(values: set) -> str:
    def one(v):
        return "–".join(map(str, v)) if isinstance(v, tuple) else str(v)

    return ", ".join(sorted(map(one, values)))


def listing(experiments: list[Experiment]) -> str:
    """design.md's list: each departure once, with its experiments and each setting's value, the paper's and ours."""
    lines, seen = [], set()
    for e in experiments:
        for d in e.departures:
            if d.key in seen:
                continue
            seen.add(d.key)
            where = [x for x in experiments if d in x.departures]
            held = [f"{x.paper} {x.where} (`{x.command}`)" for x in where]
            values = []
            for x in where:
                mine, theirs = ours(x), paper(x)
                values += [f"`{k}` {_show(mine[k])} against {_show(theirs[k])}" for k in d.settings if k in x.stated]
            said = f" ({'; '.join(dict.fromkeys(values))})" if values else ""
            mark = f"<!-- departure: {d.key} -->".replace(" ", "\0")  # kept on one line
            item = f"- {'; '.join(held)} ([{d.page}]({d.page})): {d.text}{said} {mark}"
            item = textwrap.fill(item, 118, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False)
            lines.append(item.replace("\0", " "))
    return "\n".join(lines)


def section(text: str) -> tuple[int, int]:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return start, end


def written(experiments: list[Experiment] | None = None) -> str:
    """design.md with its list as the declarations give it."""
    text = DESIGN.read_text()
    start, end = section(text)
    return text[:start] + "\n" + listing(experiments or declared()) + "\n  " + text[end:]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--write", action="store_true", help="put the list in docs/design.md")
    p.add_argument("--check", action="store_true", help="exit 1 where docs/design.md's list differs")
    args = p.parse_args(argv)
    new = written()
    if args.check:
        if new != DESIGN.read_text():
            print("docs/design.md's departures are not what the benchmarks declare: run benchmarks/departures.py "
                  "--write", file=sys.stderr)  # fmt: skip
            return 1
        return 0
    if args.write:
        DESIGN.write_text(new)
        return 0
    print(listing(declared()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
