"""Config files as data: YAML read with its size bounded (aliases expanded), repeated keys refused, one
sentence per problem."""

from __future__ import annotations

from pathlib import Path

from vcl.errors import VCLInputError, regular_file


def read_yaml(path: str | Path) -> dict:
    import yaml

    p = Path(path)
    regular_file(p, "config file", "pass a YAML file, e.g. one from configs/")
    try:
        values = bounded_yaml(p.read_text(encoding="utf-8"), f"config file {p}")
    except UnicodeDecodeError:
        raise VCLInputError(f"config file {p} is not UTF-8 text; save it as UTF-8.") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or type(err).__name__
        where = f"line {mark.line + 1}: {problem}" if mark is not None else problem
        raise VCLInputError(f"config file {p} is not valid YAML ({where}); fix its syntax.") from None
    if values is None:
        raise VCLInputError(f"config file {p} holds no options; write some (see configs/) or leave --config out.")
    if not isinstance(values, dict):
        raise VCLInputError(f"config file {p} must hold a mapping of option: value.")
    return values


YAML_VALUES = 100_000  # the most values a config or a flag's YAML may hold once its aliases (*name) are expanded


def bounded_yaml(text: str, source: str, loader=None, load=None):
    """``text`` as YAML values (``yaml.SafeLoader`` unless ``loader``; ``load(text)`` builds them), refused in one
    sentence when it holds, or through aliases (``&name`` ... ``*name``) would expand to, more than
    :data:`YAML_VALUES` values, or refers to itself: such a value would take the run's memory before any check."""
    import yaml

    node = yaml.compose(text, Loader=loader or yaml.SafeLoader)
    if node is not None and _expanded_size(node) > YAML_VALUES:
        raise VCLInputError(
            f"{source} expands to more than {YAML_VALUES} values or refers to itself through YAML aliases "
            "(&name ... *name); write the options out plainly."
        )
    twice = _repeated_key(node) if node is not None else None
    if twice is not None:
        raise VCLInputError(f"{source} gives {twice.value!r} twice (line {twice.start_mark.line + 1}); keep one.")
    return yaml.safe_load(text) if load is None else load(text)


def _repeated_key(root):
    """The first key node that repeats a key of its mapping (YAML keeps the last silently), or None."""
    import yaml

    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys = set()
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value in keys:
                    return key
                keys.add(key.value if isinstance(key, yaml.ScalarNode) else id(key))
        stack += _yaml_children(node)
    return None


def _yaml_children(node) -> list:
    """A YAML node's child nodes: a sequence's items, a mapping's keys and values (a scalar has none)."""
    if isinstance(node.value, list):
        return [c for item in node.value for c in (item if isinstance(item, tuple) else (item,))]
    return []


def _expanded_size(root) -> float:
    """How many values the YAML node graph ``root`` stands for with every alias expanded (inf if it refers to
    itself); counted once per node, without expanding, and stopped early past :data:`YAML_VALUES`."""

    sizes: dict[int, float] = {}
    open_nodes: set[int] = set()  # being counted: meeting one again below itself is a cycle
    stack = [(root, False)]
    while stack:
        node, counted = stack.pop()
        if counted:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in _yaml_children(node))
            if sizes[id(node)] > YAML_VALUES:
                return sizes[id(node)]
            open_nodes.discard(id(node))
            continue
        if id(node) in sizes:
            continue
        open_nodes.add(id(node))
        stack.append((node, True))
        for c in _yaml_children(node):
            if id(c) in open_nodes:
                return float("inf")
            if id(c) not in sizes:
                stack.append((c, False))
    return sizes[id(root)]


def _flag_yaml(value: str):
    """jsonargparse's YAML reading of a flag's value or a --config file, bounded as :func:`bounded_yaml`."""
    from jsonargparse._loaders_dumpers import get_yaml_default_loader, yaml_load

    return bounded_yaml(value, "a YAML value", loader=get_yaml_default_loader(), load=yaml_load)
