"""What a party checks of a Setup before it builds anything: its place among the run's names and its method, each
refused in one sentence naming the field and the fix (:mod:`vcl.party.server` serves with them)."""

from __future__ import annotations

from vcl.errors import VCLInputError


def setup_place(index, names) -> tuple[int, list[str]]:
    """A Setup's place of this party among the run's names, checked: ``names`` a list of names (text), ``index`` a whole
    number (an int, not a bool, a text or a float: nothing is rounded or counted from the end) that is a place in it;
    else one sentence naming the field and the fix (:class:`VCLInputError`: the coordinator's input)."""
    if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        raise VCLInputError(
            "the names in the Setup are not a list of the organizations of the run (text); send them, in order"
        )
    if type(index) is not int or not 0 <= index < len(names):
        what = f"is {index}" if type(index) is int else f"is a {type(index).__name__} ({escaped(index)})"
        raise VCLInputError(  # no apostrophe: a refused Setup goes back with its quoted values left out
            f"the index in the Setup {what}, not a whole number from 0 to {len(names) - 1}; send the place of this "
            f"party among the {len(names)} names of the run, as an int"
        )
    return index, names


def escaped(value, most: int = 40) -> str:
    """``value`` as text a log line and a status carry (no quotes, which a party's refusals leave out, and no character
    that does not show), cut at ``most`` characters."""
    return str(value).encode("unicode_escape").decode()[:most]


def setup_method(method, settings, allowed) -> str:
    """A Setup's method, checked: a method this party runs (a registered one, one its run's family names, or a family
    class its ``allow_classes`` lists); else one sentence that names the method (:class:`VCLInputError`), or the
    class its config does not allow (:class:`PermissionError`)."""
    from vcl.family import family_for
    from vcl.registry import METHODS, is_class_path

    if isinstance(method, str) and is_class_path(method):
        if method.replace(":", ".") not in allowed:
            raise PermissionError(
                f"the run names class {method.replace(':', '.')}, which this party's allow_classes does not list; a "
                "party runs only code its own organization allows"
            )
        return method
    if isinstance(method, str) and method in METHODS:
        return method
    own = settings.get("method") if isinstance(settings, dict) else None
    if isinstance(method, str) and isinstance(own, str) and is_class_path(own) and method in family_for(own).methods:
        return method  # a name the run's own family (a class its allow_classes lists: checked before) gives a method
    shown = escaped(method) if isinstance(method, str) else f"a {type(method).__name__}"
    raise VCLInputError(
        f"the method in the Setup, {shown}, is no method this party runs; name one of {', '.join(METHODS)}, or a "
        "family class its allow_classes lists"
    )
