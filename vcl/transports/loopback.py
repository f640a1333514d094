"""A federation on one machine: each party its own process on 127.0.0.1 (``python -m vcl.party``), with keys
made as ``python -m vcl.transports.certs`` makes them; what the grpc tests and ``benchmarks/transport.py`` run::

    with LoopbackFederation(Path("fed"), ["alice", "org1", "org2"]) as fed:
        train(RunConfig.from_dict({"data.organizations": 3, **fed.overrides()}))
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import yaml

from vcl.transports import certs


class LoopbackFederation:
    """Party processes for ``names``, answering ``coordinator``; ``own``: extra settings per party; ``open_files``:
    each party's limit of open files (None: the machine's); ``preload``: as ``python -m vcl.party`` does (off by
    default here). Its CA also signs a certificate for ``intruder``, an organization no party answers."""

    def __init__(
        self,
        folder: Path,
        names: list[str],
        coordinator: str = "alice",
        own: dict | None = None,
        max_message_mb=16,
        open_files: int | None = None,
        preload: bool = False,
    ):
        self.folder, self.names, self.coordinator = Path(folder), list(names), coordinator
        self.keys = self.folder / "keys"
        certs.make(self.keys, sorted(set(names) | {coordinator, "intruder"}))
        self.own, self.max_message_mb, self.open_files = own or {}, max_message_mb, open_files
        self.preload = preload
        self.procs: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}
        self.log: dict[str, list[str]] = {}  # each party's output after its first line (its log), as it comes
        try:
            for name in names:
                self.start(name)
            for name in names:
                self.wait(name)
        except BaseException:
            self.close()
            raise

    def tls(self, name: str) -> dict:
        return {
            "ca": str(self.keys / "ca.pem"),
            "cert": str(self.keys / f"{name}.pem"),
            "key": str(self.keys / f"{name}.key"),
        }

    def config_file(self, name: str) -> Path:
        settings = {
            "name": name,
            "listen": f"127.0.0.1:{self.ports.get(name, 0)}",
            "coordinator": self.coordinator,
            "tls": self.tls(name),
            "root": str(self.folder / f"{name}-machine"),
            "max_message_mb": self.max_message_mb,
            "preload": self.preload,
            **self.own.get(name, {}),
        }
        path = self.folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(settings))
        return path

    def start(self, name: str) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "vcl.party", "--config", str(self.config_file(name))],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            preexec_fn=None if self.open_files is None else self._limit_open_files,
        )

    def _limit_open_files(self) -> None:  # in the party's process, before it starts: a machine with few to spare

        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

    def wait(self, name: str) -> None:
        """Until the party says it listens (its first line), or ends (then its output says why)."""
        proc = self.procs[name]
        line = proc.stdout.readline()
        if "listening on port" not in line:
            raise RuntimeError(f"party {name} did not start: {line}{proc.stdout.read() if proc.poll() else ''}")
        self.ports[name] = int(line.rsplit(" ", 1)[1])
        lines = self.log.setdefault(name, [])

        def read():
            for out in proc.stdout:
                lines.append(out)

        threading.Thread(target=read, daemon=True).start()

    def restart(self, name: str) -> None:
        self.start(name)  # on its old port
        self.wait(name)

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait()

    def overrides(self, names: list[str] | None = None) -> dict:
        """The coordinator's transport settings for a run of ``names``' parties."""
        tls = self.tls(self.coordinator)
        return {
            "transport.kind": "grpc",
            "transport.addresses": {n: f"127.0.0.1:{self.ports[n]}" for n in names or self.names},
            "transport.tls_ca": tls["ca"],
            "transport.tls_cert": tls["cert"],
            "transport.tls_key": tls["key"],
            "transport.deadline": 120.0,
        }

    def pids(self) -> dict[str, int]:
        return {n: p.pid for n, p in self.procs.items()}

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
