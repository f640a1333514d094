"""One error type for bad input, raised before any work starts; a lost party, and the parties a run goes on without."""

from __future__ import annotations

import stat
import sys
from pathlib import Path


class VCLInputError(ValueError):
    """Bad input: the message names the input and says how to fix it."""


class PartyLost(RuntimeError):
    """A party's process ended (it crashed, was killed, or its machine left), or it did not answer, while the
    coordinator needed it; ``happened`` says which ("stopped", "did not answer", ...)."""

    def __init__(self, party: str, during: str, reason: str = "its process ended", happened: str = "stopped"):
        super().__init__(f"party {party} {happened} during {during}: {reason}")
        self.party, self.during, self.reason, self.happened = party, during, reason, happened
        self.saved_round, self.out_dir = None, None  # the runner says which round is saved, and where


class PartyFailed(PartyLost):
    """A party answered that one of its operations failed (a Save on a full disk, say): it still serves, but the run
    cannot go on without what that operation should have done."""

    def __init__(self, party: str, during: str, op: str, reason: str):
        super().__init__(party, during, reason)
        RuntimeError.__init__(self, f"party {party} failed its {op} during {during} ({reason}); it is still serving")


class OutOfMemory(RuntimeError):
    """The run ran out of memory (torch's failed allocation, or Python's MemoryError) during its rounds."""


def regular_file(path: Path, what: str, fix: str) -> None:
    """One sentence if ``path`` is not a regular file, saying what it is instead (nothing is opened: a FIFO or a
    device would block or never end)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise VCLInputError(f"{what} {path} does not exist; {fix}.") from None
    except OSError as err:
        raise VCLInputError(f"{what} {path} cannot be read ({err.strerror}); {fix}.") from None
    if stat.S_ISREG(mode):
        return
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
    kind = next((name for test, name in kinds if test(mode)), "a device")
    raise VCLInputError(f"{what} {path} is {kind}, not a file; {fix}.")


def one_sentence(work, again: str) -> int:
    """``work()`` as a command: 0; one sentence and 2 for bad input; one sentence and 1 for a party lost (``again``:
    what to do then)."""

    try:
        work()
    except VCLInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except PartyLost as err:
        print(f"error: {err}; {again}", file=sys.stderr)
        return 1
    return 0


def first_line(err: BaseException, chars: int = 300) -> str:
    """An error's first line, cut to ``chars`` (``""`` if it says nothing): what a sentence or a status quotes of
    it, never a peer's megabytes."""
    text = str(err).strip()
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= chars else line[:chars] + "…"


class Missing:
    """The parties a run goes on without: ``skip`` (``run.missing_parties: skip``: a lost party other than the first
    is left out; else a lost party ends the run), and ``parties``, each one left out so far and why. A transport keeps
    one (:attr:`Transport.missing`), as its own start-up may already lose a party."""

    def __init__(self, skip: bool = False):
        self.skip = skip
        self.parties: dict[str, str] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.parties

    def tolerate(self, answers: list, first: str) -> list:
        """Answers of several parties, where a lost one may stand as its :class:`PartyLost` (a transport's
        ``deliver`` and ``each`` may return one in a party's place): raised, unless ``skip`` leaves that party out
        (``first`` never), then None in its place."""
        out = []
        for answer in answers:
            if isinstance(answer, PartyLost):
                if not self.skip or answer.party == first:
                    raise answer
                self.leave(answer.party, str(answer))
                answer = None
            out.append(answer)
        return out

    def leave(self, name: str, why: str) -> None:
        """Leave ``name`` out from now on, saying ``why``."""
        self.parties[name] = why

    def back(self, name: str) -> None:
        """``name`` answers again (it rejoined, :meth:`vcl.coordinator.federation.Federation.rejoin`)."""
        self.parties.pop(name, None)
