"""A party's own settings (``python -m vcl.party --config <own>.yaml``; docs/deployment.md lists them), checked
before the party listens: each mistake is one sentence naming the key and the fix
(:class:`vcl.errors.VCLInputError`)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from vcl.errors import VCLInputError
from vcl.transports.certs import NAME, check_pems


@dataclass
class PartySettings:
    name: str
    listen: str
    coordinator: str
    tls: dict = field(default_factory=dict)
    root: str = "parties"
    csv: str = ""
    predict_csv: str = ""
    secrets: dict = field(default_factory=dict)
    allow_classes: list = field(default_factory=list)
    max_message_mb: float = 512.0
    chunk_mb: float = 4.0
    device: str = ""
    id_column: str = "id"
    data_root: str = "data"
    download: bool = False
    calls_per_peer: int = 4
    stall_s: float = 60.0
    handshake_s: float = 5.0
    idle_s: float = 30.0
    connection_age_s: float = 60.0
    max_connections: int = 0  # 0: as many as its open-files limit leaves (vcl.party.limits.connection_cap)
    preload: bool = True
    keep_messages: bool = False


def load_settings(path: str | Path) -> PartySettings:
    """A party's own config, checked: one sentence naming the key and the fix (:class:`VCLInputError`)."""
    import yaml

    from vcl.config import SECRETS
    from vcl.errors import regular_file

    path = Path(path)
    regular_file(path, "the party config", "give --config a YAML file of the party's own settings")
    try:
        raw = yaml.safe_load(path.read_text())
    except UnicodeDecodeError:
        raise VCLInputError(f"the party config {path} is not text (UTF-8); give the party's YAML settings.") from None
    except yaml.YAMLError as err:
        reason = str(err).splitlines()[0]
        raise VCLInputError(f"the party config {path} is not YAML ({reason}); fix its syntax.") from None
    if not isinstance(raw, dict):
        raise VCLInputError(f"the party config {path} is not a mapping of settings; write `name: ...` lines.")
    known = set(PartySettings.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise VCLInputError(f"the party config {path}: {unknown[0]!r} is no setting; use {sorted(known)}.")
    for key in ("name", "listen", "coordinator"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise VCLInputError(f"the party config {path} needs {key}: (a string), e.g. name: bob.")
    s = PartySettings(**raw)
    if not NAME.match(s.name):  # it names the party's folder under its root, and its certificate names it
        raise VCLInputError(
            f"the party config {path}: name={s.name!r} is not an organization's name; use lower-case letters, "
            "digits, '.', '-' and '_' (the name its certificate carries)."
        )
    host, sep, port = s.listen.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise VCLInputError(
            f"the party config {path}: listen={s.listen!r} is not host:port (a port from 0 to 65535); "
            "e.g. 0.0.0.0:50052."
        )
    try:
        socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise VCLInputError(
            f"the party config {path}: listen={s.listen!r} names a host this machine cannot resolve ({reason}); "
            "give one of its own addresses, e.g. 0.0.0.0."
        ) from None
    for key in ("max_message_mb", "chunk_mb"):
        value = getattr(s, key)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 < value <= (1024 if key == "chunk_mb" else 2**40)
        ):
            raise VCLInputError(f"the party config {path}: {key}={value!r} is not a size in MiB; e.g. {key}: 4.")
    for key in ("ca", "cert", "key"):
        if not isinstance(s.tls, dict) or not isinstance(s.tls.get(key), str):
            raise VCLInputError(
                f"the party config {path} needs tls.{key}: a PEM file (python -m vcl.transports.certs)."
            )
        regular_file(Path(s.tls[key]), f"tls.{key}", "make the federation's files with python -m vcl.transports.certs")
    check_pems(s.tls["ca"], s.tls["cert"], s.tls["key"], ("tls.ca", "tls.cert", "tls.key"), s.name)
    whole = ("calls_per_peer", "max_connections")
    for key, low, high in (("calls_per_peer", 1, 64), ("stall_s", 0.01, 86400), ("handshake_s", 0.01, 3600),
                           ("idle_s", 0.01, 10**7), ("connection_age_s", 1, 10**7),
                           ("max_connections", 0, 65536)):  # fmt: skip
        value = getattr(s, key)
        if isinstance(value, bool) or not isinstance(value, int if key in whole else (int, float)):
            value = None
        if value is None or not low <= value <= high:
            raise VCLInputError(
                f"the party config {path}: {key}={getattr(s, key)!r} is not a "
                f"{'whole number' if key in whole else 'number of seconds'} from {low:g} to {high:g}."
            )
    for key in ("id_column", "data_root"):
        if not isinstance(getattr(s, key), str) or not getattr(s, key):
            raise VCLInputError(f"the party config {path}: {key} is not a non-empty string; e.g. {key}: id.")
    for key in ("download", "preload", "keep_messages"):
        if not isinstance(getattr(s, key), bool):
            raise VCLInputError(f"the party config {path}: {key}={getattr(s, key)!r} is not true or false.")
    if not isinstance(s.secrets, dict):
        raise VCLInputError(f"the party config {path}: secrets is not a mapping; e.g. secrets: {{mpdl.secret_b: 0}}.")
    bad = sorted(map(str, set(s.secrets) - set(SECRETS)))
    if bad:
        raise VCLInputError(f"the party config {path}: secrets.{bad[0]} is no secret; use one of {sorted(SECRETS)}.")
    for key, value in s.secrets.items():
        if type(value) is not int or not 0 <= value < 2**63:
            raise VCLInputError(
                f"the party config {path}: secrets.{key}={value!r} is not a whole number from 0 to 2^63 - 1 "
                "(0: fresh from the operating system)."
            )
    if not isinstance(s.allow_classes, list) or not all(isinstance(c, str) for c in s.allow_classes):
        raise VCLInputError(
            f"the party config {path}: allow_classes is not a list of class paths; e.g. allow_classes: [my_pkg.Net]."
        )
    if s.device:  # "": as the run says
        from vcl.config.resolve import resolve_device

        resolve_device(s.device, f"the party config {path}: device")
    root = Path(s.root)
    for link in (root, root / s.name):  # where its checkpoints go: vcl never writes through a link
        if link.is_symlink():
            raise VCLInputError(
                f"the party config {path}: root={s.root!r}: {link} is a symbolic link, and vcl never writes through "
                "one; give a real folder."
            )
    place = next((p for p in (root, *root.parents) if p.exists()), Path("."))
    if not place.is_dir() or not os.access(place, os.W_OK | os.X_OK):
        what = "is not a folder" if not place.is_dir() else "cannot be written"
        raise VCLInputError(
            f"the party config {path}: root={s.root!r}: {place} {what}; give a folder this party may write."
        )
    if s.csv:
        regular_file(Path(s.csv), "the party's csv", "give csv: the path of this organization's own CSV file")
    if s.predict_csv:
        regular_file(Path(s.predict_csv), "the party's predict_csv", "give predict_csv: its own file of new people")
    return s


def read_pem(tls: dict) -> tuple[bytes, bytes, bytes]:
    return tuple(Path(tls[k]).read_bytes() for k in ("ca", "cert", "key"))
