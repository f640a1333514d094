"""The project's import contract, read from the source: no import circles (imports inside functions count; those
under ``if TYPE_CHECKING:`` do not), the method table imports nothing, infrastructure never imports the round
callbacks, and the modules stay small enough to read.

The card installs the top-level folders ``datamodules/``, ``models/`` and ``callbacks/`` as ``vcl.datamodules``,
``vcl.models`` and ``vcl.callbacks``; import-linter (through grimp) walks only the folder of a package, so it
would not see them. This test builds the graph itself, from every file of the four folders and ``train.py``."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"vcl": "vcl", "datamodules": "vcl.datamodules", "models": "vcl.models", "callbacks": "vcl.callbacks"}
MAX_LINES = 500


def project_modules() -> dict[str, Path]:
    """Every module of the project by its import name."""
    out = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            out[".".join([package, *parts])] = path
    out["train"] = ROOT / "train.py"
    return out


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports, anywhere in the file but under ``if TYPE_CHECKING:``."""

    def resolve(module: str) -> str | None:
        while module and module not in known:
            module = module.rpartition(".")[0]
        return module or None

    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            test = node.test
            if getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING":
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(filter(None, (resolve(alias.name) for alias in node.names)))

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            base = node.module or ""
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.update(filter(None, [resolve(full if full in known else base)]))

    Visitor().visit(ast.parse(path.read_text()))
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    known = project_modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path of modules (first = last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_graph_sees_every_folder_and_imports_inside_functions():
    graph = import_graph()
    assert {"vcl.datamodules.tabular", "vcl.models.residual", "vcl.callbacks.checkpoint", "train"} <= set(graph)
    assert "vcl.datamodules.csv_files" in graph["vcl.alignment.psi"]  # imported inside answer_from_file
    assert "vcl.coordinator.assembly" in graph["vcl.coordinator.runner"]


def test_no_import_circles():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_a_circle_is_found_when_there_is_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_method_table_imports_nothing_and_infrastructure_never_imports_the_callbacks():
    graph = import_graph()
    assert graph["vcl.registry"] == set()  # the command line lists the methods from it alone
    outer_loop = {
        "vcl.coordinator.runner",
        "vcl.testing.suite",
    }  # the rounds' driver calls the callbacks (the suite drives runs)
    offenders = {
        name: sorted(m for m in deps if m.startswith("vcl.callbacks"))
        for name, deps in graph.items()
        if not name.startswith(("vcl.callbacks", "vcl.methods.")) and name not in outer_loop and name != "train"
    }
    assert {k: v for k, v in offenders.items() if v} == {}


PARTY_SIDE = ("party", "dual", "blinding")  # a family's modules that run at a party, never at its coordinator


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_a_familys_coordinator_never_imports_its_party_code():
    graph = import_graph()
    coordinators = [name for name in graph if name.startswith("vcl.methods.") and name.endswith(".coordinator")]
    assert coordinators
    for name in coordinators:
        family = name.rpartition(".")[0]
        party_side = {
            m for m in reachable(graph, name) if m.startswith(family + ".") and m.rpartition(".")[2] in PARTY_SIDE
        }
        assert not party_side, f"{name} reaches {sorted(party_side)}"


def test_no_module_over_500_lines():
    long = {
        name: n for name, path in project_modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these modules (at most {MAX_LINES} lines each): {long}"


def test_the_newcomers_map_names_files_that_exist():
    """docs/design.md's map says which files to touch for a method, a dataset, a learner, an option, a transport
    and a callback, and walks a config value to a party: every path it names (in backticks) exists."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text[text.index("## A map for newcomers") :]
    section = section[: section.find("\n## ", 1) if "\n## " in section[1:] else len(section)]
    named = {p for p in re.findall(r"`((?:vcl|datamodules|models|callbacks|tests)/[\w/<>.]+|train\.py)`", section)}
    assert len(named) >= 15, named
    missing = sorted(p for p in named if "<" not in p and not (ROOT / p).exists())
    assert missing == [], missing


def design_walk(start: str, end: str, calls: str) -> tuple[list[str], set[str]]:
    """A walk of design.md's map, from the paragraph opening with ``start`` to ``end``: its numbered steps (the file
    each names first, in order) and the helpers named after ``calls``."""
    text = (ROOT / "docs" / "design.md").read_text()
    walk = text[text.index(start) :]
    walk = walk[: walk.index(end)]
    steps = re.findall(r"^\d+\. `([\w/.]+)`", walk, flags=re.M)
    helpers = set(re.findall(r"`((?:vcl|models|datamodules|callbacks)/[\w/]+\.py)`", walk.split(calls)[1]))
    return steps, helpers


def test_one_gal_round_passes_through_the_files_design_md_lists_in_order(tmp_path):
    """design.md's walk through one GAL round of the default run and its tail (the round's record, TensorBoard, the
    checkpoints of Alice and of every party): the files round 2 enters, traced, are its steps
    (entered first in the order listed) and the helpers it names; no round reaches into another file unlisted."""
    import sys

    from vcl.callbacks import RoundCallback, RoundCheckpoint, TensorBoardRounds

    from vcl.config import parse_args
    from vcl.coordinator.runner import train

    steps, helpers = design_walk(
        "One GAL round of the default run", "How a config value reaches a party", "What the round calls"
    )
    assert len(steps) <= 15 and steps[0] == "vcl/coordinator/runner.py"
    entered: dict[str, None] = {}
    called: set[tuple[str, str]] = set()

    fits_inside: list[bool] = []  # for each fit: whether the runtime's batch entry and the party's were on the stack

    def trace(frame, event, arg):
        path = frame.f_code.co_filename
        if event == "call" and path.startswith(str(ROOT)) and "/." not in path and path != __file__:
            entered.setdefault(name := Path(path).relative_to(ROOT).as_posix(), None)
            called.add((name, frame.f_code.co_name))
            if (name, frame.f_code.co_name) == ("vcl/engine/concurrent.py", "fit_jobs"):
                stack, f = set(), frame
                while f is not None:
                    stack.add((Path(f.f_code.co_filename).name, f.f_code.co_name))
                    f = f.f_back
                fits_inside.append({("runtime.py", "handle_batch"), ("organization.py", "handle_batch")} <= stack)

    class Tracer(RoundCallback):  # the last callback: from round 1's end (all imported) to round 2's, tail included
        def on_round_end(self, run, record):
            profile = trace if record["round"] == 1 else None
            if record["round"] in (1, 2):
                sys.setprofile(profile)

    config = parse_args(["--run.device", "cpu", "--run.rounds", "2", "--run.audit", "false", "--out", str(tmp_path)])
    try:
        train(config, verbose=False, overwrite=True, callbacks=[TensorBoardRounds(), RoundCheckpoint(), Tracer()])
    finally:
        sys.setprofile(None)
    assert set(entered) <= set(steps) | helpers, sorted(set(entered) - set(steps) - helpers)
    assert [f for f in entered if f in steps] == steps, [f for f in entered if f in steps]
    party = "vcl/methods/organization.py"  # every fit runs inside the contract's entry, called by the party's runtime
    assert {("vcl/party/runtime.py", "handle_batch"), (party, "handle_batch"), (party, "_reply")} <= called
    assert fits_inside and all(fits_inside), fits_inside


def test_the_default_runs_setup_passes_through_the_files_design_md_lists_in_order(tmp_path):
    """design.md's walk through the default run's setup, from ``train`` to its first round: the files whose functions
    setup runs (not what it imports), traced, are its steps (at most 30, entered first in the order listed) and the
    helpers it names; setup reaches into no file unlisted."""
    import sys

    from vcl.callbacks import RoundCallback

    from vcl.config import parse_args
    from vcl.coordinator.runner import train

    steps, helpers = design_walk(
        "The default run's setup, from `train`", "One GAL round of the default run", "What setup calls"
    )
    assert len(steps) <= 30 and steps[0] == "vcl/coordinator/runner.py"
    entered: dict[str, None] = {}

    def trace(frame, event, arg):
        path, code = frame.f_code.co_filename, frame.f_code
        if event == "call" and code.co_flags & 1 and path.startswith(str(ROOT)) and "/." not in path:  # a function
            if path != __file__:
                entered.setdefault(Path(path).relative_to(ROOT).as_posix(), None)

    class Stop(RoundCallback):  # the first callback: setup ends where the rounds begin
        def on_run_start(self, run):
            sys.setprofile(None)

    config = parse_args(["--run.device", "cpu", "--run.rounds", "1", "--run.audit", "false", "--out", str(tmp_path)])
    sys.setprofile(trace)
    try:
        train(config, verbose=False, overwrite=True, callbacks=[Stop()])
    finally:
        sys.setprofile(None)
    assert set(entered) <= set(steps) | helpers, sorted(set(entered) - set(steps) - helpers)
    assert [f for f in entered if f in steps] == steps, [f for f in entered if f in steps]


def test_a_run_looks_its_family_up_once_and_hands_it_down(tiny, monkeypatch):
    """The config's family is found once (the run's checks), then handed to what reads the data, builds the
    protocols (the compared method's too) and the callbacks: no step of the setup looks it up again."""
    import vcl.family
    from vcl.coordinator.runner import train

    looked: list[str] = []
    find = vcl.family.family_for
    monkeypatch.setattr(vcl.family, "family_for", lambda method: looked.append(method) or find(method))
    train(tiny(compare=["alone"], **{"run.rounds": 1}), verbose=False)
    assert looked == ["gal"]


# the modules that import project modules inside functions, and why (docs/design.md, "What a run imports")
LAZY = {
    "train": "answers --help and a bad option in one sentence before torch loads",
    "vcl.party.server": "python -m vcl.party reads its config and listens before torch loads",
    "vcl.party.settings": "read by python -m vcl.party before torch loads",
    "vcl.party.guard": "serves python -m vcl.party before torch loads",
    "vcl.party.checks": "checks a Setup in python -m vcl.party, which listens before torch loads",
    "vcl.transports.certs": "python -m vcl.transports.certs imports no torch",
    "vcl.use.serve": "python -m vcl.use.serve answers --help and a bad option before torch loads",
    "vcl.models.classifier": "scikit-learn's estimators, only where a run names one",
    "vcl.models.sklearn": "XGBoost's adapter, only where a run names it",
    "vcl.methods.dc.models": "XGBoost's adapter, only where a run names it",
    "vcl.methods.gal": "its coordinator (Alice's side), only at Alice: a party's process loads the family without it",
    "vcl.methods.ascii": "its coordinator (Alice's side), only at Alice: a party's process loads the family without it",
    "vcl.methods.dc": "its coordinator (the master's side), only there: a worker's process loads the family without it",
    "vcl.methods.mpdl": "its coordinator (C's side), only there: A's and B's processes load the family without it",
    "vcl.family": "the contract imports no data module (Lightning) for the one default that reads one (alice_data)",
}


def test_project_imports_sit_at_the_top_of_modules_but_where_a_reason_is_written():
    late = {}
    for name, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    module = getattr(inner, "module", None) or (
                        inner.names[0].name if isinstance(inner, ast.Import) else ""
                    )
                    if isinstance(inner, (ast.Import, ast.ImportFrom)) and module.split(".")[0] == "vcl":
                        late.setdefault(name, set()).add(module)
    assert set(late) <= set(LAZY), sorted(set(late) - set(LAZY))


def test_the_entry_points_that_answer_before_torch_loads_import_no_torch():
    entry = "vcl.party.server, vcl.transports.certs, vcl.use.serve"
    code = f"import sys, {entry}; print(sorted({{'torch', 'sklearn'}} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"


CORE = ("vcl.coordinator", "vcl.party", "vcl.transports", "vcl.family", "vcl.protocol", "vcl.messages", "vcl.transport")


def test_the_core_names_no_method_and_no_methods_message():
    """The generic core (the coordinator, the party runtime, the transports and the contracts) imports nothing of
    ``vcl.methods``, names no built-in method (a method's name is a family's, the registry's and the config's) and no
    message class a family defines: a new family needs no edit of the core."""
    from vcl.family import family_for
    from vcl.registry import METHODS, TRANSPORTS
    from vcl.transports.wire import message_classes

    for method in METHODS:
        family_for(method)  # every built-in family's messages registered
    theirs = {name for name, cls in message_classes().items() if cls.__module__.startswith("vcl.methods")}
    methods = set(METHODS) - set(TRANSPORTS)  # "local" is a transport's kind too
    graph, known = import_graph(), project_modules()
    core = [name for name in known if name.startswith(CORE)]
    assert len(core) >= 20 and theirs >= {"PseudoResidual", "FittedValues", "IgnoranceScores", "AnchorShare"}
    for name in core:
        assert not {m for m in graph[name] if m.startswith("vcl.methods")}, f"{name} imports a method family"
        tree = ast.parse(known[name].read_text())
        named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
            n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
        }
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not named & theirs, f"{name} names {sorted(named & theirs)}, a family's messages"
        assert not strings & methods, f"{name} names the methods {sorted(strings & methods)}"


ALICE_SIDE = ("vcl.coordinator", "vcl.protocol", "vcl.audit", "vcl.use", "vcl.callbacks", "vcl.methods.assisted")


def test_a_partys_own_process_imports_none_of_alices_side():
    """What ``python -m vcl.party`` and a Ray actor import, and every built-in family's party built as a party's own
    process builds it (:func:`vcl.party.loading.own_party`, from its copy of the config): no module of the
    coordinator's side (the run builder, the protocols, the families' coordinators, the audit, the round callbacks)."""
    code = f"""
import sys
import vcl.party.server, vcl.party.runtime, vcl.transports.ray
from vcl.config import parse_args
from vcl.party.loading import own_party
cases = [
    (["--data.dataset", "wine"], "gal", 1, 3),
    (["--data.dataset", "wine", "--learner.model", "mlp", "--learner.hidden", "8"], "interm", 1, 3),
    (["--method", "ascii", "--data.dataset", "wine"], "ascii", 1, 3),
    (["--method", "dc_smote", "--data.dataset", "wine", "--dc.public_rows", "30"], "dc_smote", 0, 3),
    (["--method", "dc_smote", "--data.dataset", "wine", "--dc.public_rows", "30"], "dc_smote", 4, 3),
    (["--method", "mpdl", "--data.dataset", "breast_cancer", "--mpdl.max_rows", "200"], "mpdl", 0, 2),
    (["--method", "mpdl", "--data.dataset", "breast_cancer", "--mpdl.max_rows", "200"], "mpdl", 2, 2),
]
for argv, method, index, k in cases:
    own_party(parse_args(argv + ["--run.device", "cpu"]), method, index, None, "classification", k)
alice = {ALICE_SIDE!r}, (".coordinator", ".interm", ".late")
print(sorted(m for m in sys.modules if m.startswith(alice[0]) or m.endswith(alice[1])))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


# the third-party packages imported inside functions, and why; "[key]" cites a cost measured in RECORD (at least a
# millisecond of a run that never uses it, after torch and Lightning), by benchmarks/imports.py
DEFERRED = {
    "sklearn": "scikit-learn only where used: DC, tree and SVM learners, generated data, the audit [sklearn]",
    "xgboost": "an optional extra, where a run names it [xgboost]",
    "skops": "a scikit-learn model kept in a checkpoint, written or read [skops]",
    "ray": "an optional extra: transport.kind ray and sweeps on a cluster [ray]",
    "grpc": "transport.kind grpc and python -m vcl.party only [grpc]",
    "cryptography": "python -m vcl.transports.certs and the hostile probes' certificates only [cryptography]",
    "nacl": "the row alignment of CSV files only [nacl]",
    "starlette": "python -m vcl.use.serve only [starlette]",
    "uvicorn": "python -m vcl.use.serve only [uvicorn]",
    "pyarrow": "Arrow's CSV and Parquet readers, imported before read_ahead's thread starts reading [pyarrow.csv]",
    "jsonargparse": "the command line's parser, which python -m vcl.party does not build [jsonargparse]",
    "filelock": "the run directory's lock, where a run writes one [filelock]",
    "torch": "TensorBoard's writer where a run or a party logs [tensorboard]; python -m vcl.use.serve and the hostile "
    "probes answer before torch loads",
    "yaml": "python -m vcl.party reads its YAML before torch loads",
    "numpy": "python -m vcl.party answers the row alignment before torch loads; numpy 2 moved _reconstruct",
    "matplotlib": "the Agg backend chosen only where vcl draws, so a user's own session keeps its backend",
    "resource": "Unix only: the party's limit of open files",
}
RECORD = ROOT / "docs" / "records" / "2026-12-02-cpu" / "imports.json"


def test_third_party_imports_inside_functions_have_a_reason_and_a_measured_cost():
    used: dict[str, set[str]] = {}
    for name, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import):
                        packages = [alias.name.split(".")[0] for alias in inner.names]
                    elif isinstance(inner, ast.ImportFrom) and inner.module and not inner.level:
                        packages = [inner.module.split(".")[0]]
                    else:
                        continue
                    for package in packages:
                        if package != "vcl":
                            used.setdefault(package, set()).add(name)
    assert set(used) <= set(DEFERRED), {p: sorted(m) for p, m in used.items() if p not in DEFERRED}
    assert set(DEFERRED) <= set(used), f"reasons for packages no function imports: {sorted(set(DEFERRED) - set(used))}"
    measured = json.loads(RECORD.read_text())["deferred"]
    for package, reason in DEFERRED.items():
        for key in re.findall(r"\[([\w.]+)\]", reason):
            assert (measured[key]["seconds"] or 0) >= 0.001, (
                f"{package}: {key} costs a run nothing: import it at the top"
            )
