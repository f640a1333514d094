#!/usr/bin/env python
"""The results page, generated from the benchmark records kept in ``docs/records/``.

    python benchmarks/results.py            # writes docs/results.md
    python benchmarks/results.py --check    # exit 1 if docs/results.md is not what the records give, or a
                                            # docs page quotes a figure that no record gives (that the
                                            # records its paragraph links do not give)

Each folder of ``docs/records/`` holds the records of one machine on one day. Its ``README.md`` names the
machine in its first heading and, in a table of ``| `file` | `command` |`` rows, the command that wrote each
record file. Each file's tables come from its benchmark's own ``report(records)`` (``gpu_check.py``:
``markdown``), the code that printed them when the benchmark ran, so no figure on the page is copied by hand.
A file written by no benchmark script (a ``.jsonl`` of one-off measurements) is shown as a plain table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RECORDS = ROOT / "docs" / "records"
PAGE = ROOT / "docs" / "results.md"
ROW = re.compile(r"^\|\s*(?P<files>`[^|]+`)\s*\|\s*`(?P<command>[^`]+)`")


def load(name: str):
    """A script of ``benchmarks/`` imported as a module by its path (``common`` and ``departures`` first, which the
    scripts share), without putting ``benchmarks/`` on ``sys.path``."""
    for module in ("common", "departures", name):
        if module not in sys.modules:
            spec = importlib.util.spec_from_file_location(module, HERE / f"{module}.py")
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[module] = loaded
            spec.loader.exec_module(loaded)
    return sys.modules[name]


def commands(folder: Path) -> dict[str, str]:
    """``{file name: command}`` from the folder's README table."""
    out = {}
    for line in (folder / "README.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            for name in re.findall(r"`([^`]+\.jsonl?)`", match["files"]):
                out[name] = match["command"]
    return out


def plain_table(records: list[dict]) -> str:
    """Records' scalar fields as one markdown table (the keys of the first record)."""
    keys = [k for k, v in records[0].items() if isinstance(v, (int, float, str, bool))]
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in records:
        cells = [f"{r[k]:.4f}" if isinstance(r.get(k), float) else str(r.get(k, "")) for k in keys]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def read_records(path: Path) -> list[dict]:
    """A record file's records: a JSON list, or one JSON object a line (``.jsonl``)."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.loads(path.read_text())


def section(folder: Path, name: str, command: str) -> str:
    path = folder / name
    records = read_records(path)
    script = re.search(r"benchmarks/(\w+)\.py", command)
    if script is None:
        body = plain_table(records)
    elif script[1] == "gpu_check":
        body = load("gpu_check").markdown(records, folder.name[:10]).split("\n", 2)[2]  # its own title dropped
    else:
        body = load(script[1]).report(records)
    return f"### `{name}`\n\n`{command}`\n\n{body.strip()}\n"


# The index: (paper, its figures or tables, the page that reads them, the benchmark, what its command holds, what
# it does not) -> every record a command of that benchmark wrote, newest first, and the pictures drawn from them.
INDEX = [
    ("GAL", "Tables 1, 10, 11: UCI data, M = 2, 4, 8", "gal.md", "gal_uci", "", None),
    ("GAL", "Figures 4 and 14: rounds, η, weights", "gal.md", "gal_fig4", "", "--settings uci"),
    ("GAL", "Figures 7–12: the same for the UCI data", "gal.md", "gal_fig4", "--settings uci", None),
    ("GAL", "Figure 6: images cut into patches", "gal.md", "data_views", "gal_fig6", None),
    ("GAL", "Tables 2, 12, 13 and 14: CNN organizations, Deep Model Sharing, computation", "gal.md", "gal_images",
     "", None),
    ("GAL", "Tables 4–6, 15–21, Figure 5: privacy, noisy and useless organizations", "gal.md", "gal_ablations", "",
     None),
    ("GAL", "the authors' code on our machine", "gal.md", "authors_gal", "", None),
    ("ASCII", "Figure 1: how ASCII works", "ascii.md", "ascii", "fig1", None),
    ("ASCII", "Figure 5: an image in two halves", "ascii.md", "data_views", "ascii_fig5", None),
    ("ASCII", "Figures 3, 4, 6: against Single, Oracle and its variants", "ascii.md", "ascii", "", "fig1"),
    ("MPDL", "Tables I–IV, Figures 7, 8, 13: dual learning, FTL, privacy", "mpdl.md", "mpdl", "", None),
    ("MPDL", "Figures 5, 6 and 13's MNIST panel on the MNIST subset", "mpdl.md", "mpdl_mnist", "", None),
    ("DC", "Table 1, Figures 1–3, Tables 6–7: anchors, SMOTE's parameters, cross-validation", "dc.md", "dc", "",
     None),
    ("all four", "privacy measured alike: every method's attacks and budgets side by side", "privacy.md", "privacy",
     "", None),
    ("vcl", "scale, parties apart, speed, start-up, GPU", "development.md", "", "", None),
]  # fmt: skip
PAPERS = ("GAL", "ASCII", "MPDL", "DC")


def record_anchors() -> list[tuple[Path, str, str]]:
    """(folder, file name, its anchor on this page) of every record, in the page's order (a name seen again is
    numbered ``-1``, ``-2`` as GitHub numbers headings)."""
    out, seen = [], {}
    for folder in sorted((p for p in RECORDS.iterdir() if p.is_dir()), reverse=True):
        for name in commands(folder):
            base = anchor(f"`{name}`")
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.append((folder, name, base if count == 0 else f"{base}-{count}"))
    return out


def index() -> str:
    """The index by paper: each figure or table, the page that reads it, its pictures and its records."""
    figures = load("figures").catalogue()
    lines = ["## Index by paper\n", "Each row: what the paper shows, the page that sets our figures beside its "
             "own, the pictures (`python benchmarks/figures.py --out docs/figures` redraws them from the records) "
             "and the records, newest first (each section below names the command that wrote it).\n",
             "| paper | figure or table | read in | pictures | records |", "|---|---|---|---|---|"]  # fmt: skip
    every = record_anchors()
    for paper, what, page_name, script, holds, lacks in INDEX:
        picked = []
        for folder, name, tag in every:
            command = commands(folder)[name]
            used = re.search(r"benchmarks/(\w+)\.py", command)
            ours = used is not None and used[1] == script if script else used is None or used[1] not in {
                row[3] for row in INDEX if row[3]}  # fmt: skip
            if ours and holds in command and not (lacks and lacks in command):
                picked.append((folder, name, tag))
        paths = {folder / name for folder, name, _ in picked}
        shown = [f.name for f in figures if f.path in paths]
        pics = ", ".join(f"[{n}](figures/{n}.png)" for n in shown) or "—"
        records = ", ".join(f"[{folder.name[:10]} {name}](#{tag})" for folder, name, tag in picked)
        lines.append(f"| {paper} | {what} | [{page_name}]({page_name}) | {pics} | {records} |")
    return "\n".join(lines) + "\n"


def folder_versions(folder: Path) -> str | None:
    """What a folder's records ran with: its ``versions.json`` (written beside every record since 2026-12-06, by
    ``common.write_records``), or, for the folders before, its README's line that begins ``Versions:``."""
    place = folder / "versions.json"
    if place.exists():
        alike: dict[str, list[str]] = {}
        for name, held in json.loads(place.read_text()).items():
            alike.setdefault(json.dumps(held, sort_keys=True), []).append(f"`{name}`")
        lines = []
        for key, names in alike.items():
            held = json.loads(key)
            packages = ", ".join(f"{k} {v}" for k, v in held["packages"].items())
            lines.append(f"Versions ({', '.join(names)}): Python {held['python']}, {held['machine']}; {packages}.")
        return "\n\n".join(lines)
    said = (folder / "README.md").read_text().splitlines()
    return next((line for line in said if line.startswith("Versions:")), None)


def page() -> str:
    parts = [
        "# Results\n",
        "Generated by `python benchmarks/results.py` from the records in [records/](records/) — do not edit by "
        "hand. Each section is one machine on one day; each record file shows the command that wrote it and the "
        "tables its benchmark prints. How to read them, and where they stand against the papers, is on each "
        "method's page.\n",
        index(),
    ]
    for folder in sorted((p for p in RECORDS.iterdir() if p.is_dir()), reverse=True):
        title = (folder / "README.md").read_text().splitlines()[0].lstrip("# ").strip()
        parts.append(f"## {title}\n")
        parts.append(f"{folder_versions(folder)}\n")
        for name, command in commands(folder).items():
            parts.append(section(folder, name, command))
    return "\n".join(parts)


FIGURE = re.compile(r"(?<![\w.\-/])\d+\.\d+(?![\w.]*\d)")  # a decimal figure as the docs quote one: 92.7, 0.9722
MEASURED = re.compile(r"<!-- measured: `(?P<command>[^`]+)` -->")
SCRIPT = re.compile(r"(?:benchmarks/\w+\.py|train\.py|make \w+)")


def recorded_figures(text: str) -> set[str]:
    """Every decimal figure of the results page, and each of them rounded to fewer places (a page may quote
    0.9722 as 0.972 or 0.97)."""
    out = set()
    for figure in FIGURE.findall(text):
        places = len(figure.partition(".")[2])
        out |= {f"{float(figure):.{k}f}" for k in range(1, places + 1)}
    return out


LINK = re.compile(r"results\.md#([\w\-]+)")


def anchor(heading: str) -> str:
    """The anchor of a heading, as GitHub makes it: lowercased, what is not a letter, digit, space, hyphen or
    underscore dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections_by_anchor(page_text: str) -> dict[str, set[str]]:
    """The figures of each section of the results page, by the anchor a link to it uses: a day's folder (``##``:
    every record under it) and each record file (``###``); a heading seen again is numbered ``-1``, ``-2``, as
    GitHub numbers it."""
    heads = list(re.finditer(r"^(#{2,3}) (.+?)\s*$", page_text, flags=re.M))
    out: dict[str, set[str]] = {}
    seen: dict[str, int] = {}
    for i, head in enumerate(heads):
        end = next((h.start() for h in heads[i + 1 :] if len(h[1]) <= len(head[1])), len(page_text))
        base = anchor(head[2])
        count = seen.get(base, 0)
        seen[base] = count + 1
        out[base if count == 0 else f"{base}-{count}"] = recorded_figures(page_text[head.end() : end])
    return out


def unrecorded(text: str, recorded: set[str], sections: dict[str, set[str]] | None = None) -> list[str]:
    """The decimal figures of a docs page that no record gives: ``paragraph: figure`` for each. A paragraph that
    links records of the results page (``results.md#anchor``; ``sections``: :func:`sections_by_anchor`) must take
    its figures from those records, so a figure copied from the wrong record, or mistyped into one that another
    record happens to hold, is caught. Not counted: code (fenced blocks, inline code: commands, settings,
    versions), link targets, and paragraphs that carry ``<!-- measured: `command` -->`` naming the command beside
    them that gives their figures (a benchmark script, ``train.py`` or a ``make`` target)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    missing = []
    for paragraph in re.split(r"\n\s*\n", text):
        marker = MEASURED.search(paragraph)
        if marker:
            if not SCRIPT.search(marker["command"]):
                missing.append(f"{paragraph[:60]!r}: the measured marker names no script ({marker['command']})")
            continue
        allowed = recorded
        links = LINK.findall(paragraph) if sections is not None else []
        if links:
            missing += [f"{paragraph[:60]!r}: a link to no record (#{a})" for a in links if a not in sections]
            allowed = set().union(*(sections.get(a, set()) for a in links))
        prose = re.sub(r"\]\([^)]*\)", "]", re.sub(r"`[^`]*`", "", paragraph))
        missing += [f"{paragraph[:60]!r}: {f}" for f in FIGURE.findall(prose) if f not in allowed]
    return missing


# a sentence that says our figures agree with the paper's: "gives the paper's Late figures", "the paper's
# figures correspond to `paper`", "matches the paper's values"
AGREES = re.compile(
    r"\b(give|gives|reproduce|reproduces|match|matches|meet|meets|equal|equals|correspond|corresponds|come|comes)\b"
    r"[^.;]{0,60}\bpaper's\b[^.;]{0,40}\b(figure|figures|value|values|numbers|results|tables?)\b"
    r"|\bpaper's\b[^.;]{0,40}\b(figures|values|numbers|results)\b[^.;]{0,30}\b(correspond|come from)\b",
    re.I,
)
DENIES = re.compile(r"\b(not|neither|nor|no|never|none|differ|differs|unlike)\b|n't\b", re.I)


def unsupported_claims(text: str, recorded: set[str]) -> list[str]:
    """Sentences that say a result agrees with the paper's figures but quote no figure of a record beside it (the
    reader must see both numbers); a sentence that says they do not agree needs none. Code is not read."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    found = []
    for paragraph in re.split(r"\n\s*\n|\n(?=#)", text):
        prose = re.sub(r"\s+", " ", re.sub(r"\]\([^)]*\)", "]", re.sub(r"`[^`]*`", "`…`", paragraph)))
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z*(`])", prose):
            if AGREES.search(sentence) and not DENIES.search(sentence):
                if not any(f in recorded for f in FIGURE.findall(sentence)):
                    found.append(sentence.strip()[:160])
    return found


def prose_of(path: Path) -> str:
    """A page's text; a Python file's docstrings (the config's texts), one paragraph each."""
    text = path.read_text()
    return "\n\n".join(re.findall(r'"""(.*?)"""', text, flags=re.S)) if path.suffix == ".py" else text


def pages_with_claims() -> list[Path]:
    """Where a sentence may compare with the paper: the docs pages, the records' READMEs, the config's own texts
    (``--help``) and the benchmarks' (each script's ``--help``)."""
    return [
        *pages_with_figures(),
        *sorted(RECORDS.glob("*/README.md")),
        ROOT / "vcl" / "config" / "groups.py",
        ROOT / "vcl" / "config" / "families.py",
        *sorted((ROOT / "benchmarks").glob("*.py")),
    ]


def pages_with_figures() -> list[Path]:
    """The pages whose figures must come from the records: the README and every docs page but this one."""
    return [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p != PAGE)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="exit 1 if docs/results.md is not what the records give")
    args = p.parse_args(argv)
    text = page()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != text:
            print(f"{PAGE} is out of date: run python benchmarks/results.py", file=sys.stderr)
            return 1
        recorded, sections = recorded_figures(text), sections_by_anchor(text)
        missing = [
            f"{p.relative_to(ROOT)}: {m}"
            for p in pages_with_figures()
            for m in unrecorded(p.read_text(), recorded, sections)
        ]
        for line in missing:
            print(f"a figure in no record: {line}", file=sys.stderr)
        claims = [
            f"{p.relative_to(ROOT)}: {c}"
            for p in pages_with_claims()
            for c in unsupported_claims(prose_of(p), recorded)
        ]
        for line in claims:
            print(f"a claim of agreement with the paper with no record's figure beside it: {line}", file=sys.stderr)
        return 1 if missing or claims else 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
