"""Parties in their own processes: one Ray actor per party (``transport: ray``).

Each actor builds its own party and loads only its own data; the ledger is counted in the coordinator; CSV rows are
aligned by PSI on each party's node (:meth:`RayTransport.psi_answers`). One cluster is one trust domain
(docs/transport.md)."""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import socket
import threading

import torch

from vcl.alignment.psi import answer_from_file
from vcl.config import RunConfig, party_copy
from vcl.config.resolve import per_organization
from vcl.datamodules.tabular import VerticalData
from vcl.engine.memory import prepare_process
from vcl.errors import PartyLost, VCLInputError
from vcl.messages import Message, MessageRecord
from vcl.party.runtime import PartyRuntime
from vcl.transport import Parties, Transport
from vcl.transports.wire import party_ids


def start_ray(address: str, cpus: float) -> None:
    """Join the cluster at ``address`` (``auto`` or host:port), or start a local instance that can hold every party,
    once per process. Its logical CPUs only schedule actors: each party sets its torch threads to its ``party_cpus``."""
    import ray

    if ray.is_initialized():
        return
    _IDLE.clear()  # processes of an earlier Ray instance in this process ended with it
    kwargs = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    main_thread = threading.current_thread() is threading.main_thread()
    ours = signal.getsignal(signal.SIGTERM) if main_thread else None
    fix = "start one with `ray start --head` and give its address, or leave transport.address empty for a local one"
    if address and address != "auto":
        answering(address, fix)
    try:
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=max(os.cpu_count() or 1, math.ceil(cpus), 64), **kwargs)
    except (ConnectionError, ValueError, RuntimeError) as err:
        reason = str(err).strip().splitlines()[0][:160].rstrip(".") if str(err).strip() else type(err).__name__
        raise VCLInputError(
            f"transport.address={address!r}: no Ray cluster could be joined ({reason}); {fix}."
        ) from None
    if ours is not None:  # ray.init makes SIGTERM exit at once (status 15); the run's own handling stays
        signal.signal(signal.SIGTERM, ours)


def answering(address: str, fix: str, seconds: float = 3.0) -> None:
    """One sentence unless ``address`` (``host:port``, ``ray://host:port``) is well formed and something accepts a
    connection there within ``seconds`` (Ray itself would retry for minutes)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit():
        raise VCLInputError(f"transport.address={address!r} is not host:port or auto; {fix}.")
    try:
        socket.create_connection((host, int(port)), timeout=seconds).close()
    except (OSError, OverflowError) as err:
        reason = getattr(err, "strerror", None) or str(err) or type(err).__name__
        raise VCLInputError(f"transport.address={address!r}: nothing answers there ({reason}); {fix}.") from None


class PartyActor(PartyRuntime):
    """A party in its own process (a Ray actor): the party runtime, with its torch threads, its process ID, the
    broadcast payloads fetched from the object store, and party-to-party messages sent actor to actor."""

    def __init__(self, threads: int):
        super().__init__()
        torch.set_num_threads(max(1, threads))
        prepare_process()

    def pid(self) -> int:
        return os.getpid()

    def where(self) -> dict:
        """Where it runs, with the Ray node (its ID) that holds its process (``transport.party_nodes``)."""
        import ray

        return {**super().where(), "node": ray.get_runtime_context().get_node_id()}

    def handle(self, message: Message) -> Message | None:
        return super().handle(_fetched(message))

    def relay_to(self, hosts: dict) -> list[MessageRecord]:
        """Hand each message this party sent to another party straight to that party's actor, in order; the
        ledger's lines for them go back to the coordinator, the messages do not."""
        import ray

        return self.relay(lambda message: ray.get(hosts[message.receiver].forward.remote(message)), hosts)


def _stored_once(messages: list[Message]) -> list[Message]:
    """The messages with each tensor that two or more of them carry (a broadcast) put into Ray's object store once
    and carried by reference; each party fetches it on arrival (:func:`_fetched`)."""
    import ray

    seen: dict[int, int] = {}
    for message in messages:
        for _, value in _tensor_fields(message):
            seen[id(value)] = seen.get(id(value), 0) + 1
    refs = {}
    out = []
    for message in messages:
        changes = {}
        for name, value in _tensor_fields(message):
            if seen[id(value)] > 1:
                if id(value) not in refs:
                    refs[id(value)] = ray.put(value)
                changes[name] = refs[id(value)]
        out.append(dataclasses.replace(message, **changes) if changes else message)
    return out


def _tensor_fields(message: Message):
    return [(f.name, v) for f in dataclasses.fields(message) if isinstance(v := getattr(message, f.name), torch.Tensor)]


def _fetched(message: Message) -> Message:
    """``message`` with the fields :func:`_stored_once` carried by reference fetched from the object store."""
    import ray

    refs = {f.name: v for f in dataclasses.fields(message) if isinstance(v := getattr(message, f.name), ray.ObjectRef)}
    return (
        dataclasses.replace(message, **dict(zip(refs, ray.get(list(refs.values())), strict=True))) if refs else message
    )


RESOURCES = ("cpus", "gpus", "nodes")


def per_party(values: list, names: list[str], data, what: str) -> list:
    """``transport.party_<what>`` for each of ``names``: one value for all, one per party of the run, or one per
    organization of the data, of which a method that runs some (Alone: Alice only) takes theirs by name."""
    organizations = [v.name for v in data.views] if isinstance(data, VerticalData) else []
    if len(values) == len(organizations) != len(names) and set(names) <= set(organizations):
        return [dict(zip(organizations, values, strict=True))[n] for n in names]
    if len(values) not in (1, len(names)):
        raise VCLInputError(
            f"transport.party_{what} lists {len(values)} values for the {len(names)} parties of this run "
            f"({', '.join(names)}); give one value for all, or one per party in that order."
        )
    return per_organization(values, len(names), f"transport.party_{what}", who="parties")


def _placement(node: str) -> dict:
    return {"resources": {node: 0.001}} if node else {}


def _get(refs: list, names: list[str], during: str, lost_in_place: bool = False) -> list:
    """``ray.get`` of one call per party; a party whose process died ends the run with one sentence (``lost_in_place``:
    its :class:`PartyLost` stands in its place, for :meth:`vcl.errors.Missing.tolerate`)."""
    import ray
    from ray.exceptions import RayActorError, RayTaskError, WorkerCrashedError

    out = []
    for ref, name in zip(refs, names, strict=True):
        try:
            out.append(ray.get(ref))
        except RayTaskError as err:  # the party raised: its own error, as if it ran here
            cause = getattr(err, "cause", None)
            raise (cause if isinstance(cause, Exception) else err) from None
        except (RayActorError, WorkerCrashedError):
            if not lost_in_place:
                raise PartyLost(name, during) from None
            out.append(PartyLost(name, during))
    return out


class RayTransport(Transport):
    """One Ray actor per party; ``request_all`` sends every message at once, so parties work in parallel."""

    apart = True

    def __init__(
        self,
        config: RunConfig,
        method: str,
        names: list[str],
        data,
        build_party,
        resources: dict[str, list],
        channel=None,
    ):
        """``build_party(config, method, index, ids, kind, num_classes)`` makes a party in its own actor;
        ``resources``: each party's ``cpus``, ``gpus`` and ``nodes`` (one value per party)."""
        import ray

        super().__init__(names, channel, skip_missing=config.run.missing_parties == "skip")
        cpus, gpus, nodes = resources["cpus"], resources["gpus"], resources["nodes"]
        if config.run.device.startswith("cuda") and not all(gpus):
            raise VCLInputError(
                f"run.device={config.run.device} with transport.kind=ray: Ray hides the GPUs from an actor that holds "
                "none; give every party transport.party_gpus > 0 (a fraction shares a GPU), or use run.device=cpu."
            )
        start_ray(config.transport.address, sum(cpus))
        held = ray.cluster_resources()
        for what, want in (("CPU", sum(cpus)), ("GPU", sum(gpus))):
            if want > held.get(what, 0) + 1e-9:
                raise VCLInputError(
                    f"the parties ask for {want:g} {what}s (transport.party_{what.lower()}s) but the Ray cluster has "
                    f"{held.get(what, 0):g}; ask for less per party or add nodes."
                )
        self._hosts, self._kinds = {}, {}
        wanted = list(zip(cpus, gpus, nodes, strict=True))
        idle = _idle_hosts(wanted)
        for name, kind in zip(names, wanted, strict=True):
            self._kinds[name] = kind
            kept = idle.get(kind)
            self._hosts[name] = kept.pop() if kept else _start_host(*kind)
        self._busy = True  # until start-up and every later call came back: a host left mid-call is not kept
        settings = config.to_dict()
        if config.run.device == "auto" and not any(gpus):
            settings["run"]["device"] = "cpu"  # an actor given no GPU trains on its CPUs

        ids = party_ids(data)  # the aligned IDs (and new people's, for train.py predict)
        refs = [  # each party's copy of the config holds its own secrets and no other's
            host.make_party.remote(build_party, party_copy(settings, n), method, m, ids, data.task, data.num_classes)
            for m, (n, host) in enumerate(self._hosts.items())
        ]
        try:
            started = self.missing.tolerate(self._wait(refs, names, "start-up"), self.names[0])
            self.placed = [p for p in started if p is not None]
        except BaseException:  # a party that could not be built: no process of this run is kept or left behind
            self.close()
            raise
        self._during, self._busy = "round 0", False

    @classmethod
    def open(cls, config: RunConfig, method: str, data, parties: Parties) -> RayTransport:
        t = config.transport
        resources = {what: per_party(getattr(t, f"party_{what}"), parties.names, data, what) for what in RESOURCES}
        return cls(config, method, parties.names, data, parties.own, resources)

    @classmethod
    def check(cls, config: RunConfig) -> None:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise VCLInputError("transport.kind=ray needs Ray; install it with pip install 'vcl[ray]'.") from None

    @classmethod
    def psi_answers(cls, config: RunConfig, names: list[str], drop: list[bool], offer, new: bool = False) -> list[dict]:
        """A Ray task on each party's node (``transport.party_nodes``) reads its file and answers Alice."""
        import ray

        t, d = config.transport, config.data
        start_ray(t.address, sum(per_party(t.party_cpus, names, None, "cpus")))
        nodes = per_party(t.party_nodes, names, None, "nodes")
        read = ray.remote(num_cpus=0)(answer_from_file)
        refs = [
            read.options(**_placement(nodes[k])).remote(f, d.id_column, drop[k], d.label_column, offer)
            for k, f in enumerate((d.predict_files if new else d.csv_files)[1:], 1)
        ]
        return _get(refs, names[1:], "the ID alignment", lost_in_place=config.run.missing_parties == "skip")

    @classmethod
    def experiment(cls, config: RunConfig, task, *args):
        """A Ray task of the cluster (the experimenter: a worker process, never Alice's) runs ``task(*args)``."""
        import ray

        start_ray(config.transport.address, 0)
        return ray.get(ray.remote(num_cpus=0)(task).remote(*args))

    def _wait(self, refs: list, names: list[str], during: str) -> list:
        self._busy = True
        out = _get(refs, names, during, lost_in_place=True)
        self._busy = any(isinstance(o, PartyLost) for o in out)  # after a loss no process of this run is kept
        return out

    def _call(self, method: str, *args, names: list[str] | None = None) -> list:
        names = self.names if names is None else names
        refs = [getattr(self._hosts[n], method).remote(*args) for n in names]
        return self._wait(refs, names, self._during)

    def deliver(self, requests: list[tuple[str, Message]]) -> list[Message]:
        self._during = requests[0][1].during if requests else self._during
        messages = _stored_once([message for _, message in requests])
        refs = [
            self._hosts[party].handle.remote(message) for (party, _), message in zip(requests, messages, strict=True)
        ]
        return self._wait(refs, [p for p, _ in requests], self._during)

    def relay(self, parties: list[str]) -> None:
        for party in parties:
            records = self.missing.tolerate(self._call("relay_to", self._hosts, names=[party]), self.names[0])[0]
            for record in records or []:
                self.channel.add(record)

    def pids(self) -> dict[str, int]:
        """Each party's process ID (tests end one to show what a lost party does)."""
        return dict(zip(self.names, self._call("pid"), strict=True))

    def close(self) -> None:
        """Keep the parties' processes for this process's next run when every call came back; end them when one did
        not (a lost party, an interrupted round, or one left out under run.missing_parties: skip)."""
        import ray

        for name, host in self._hosts.items():
            if self._busy or name in self.missing:
                ray.kill(host)
            else:
                _IDLE.append((self._kinds[name], host))
        self._hosts = {}


_IDLE: list[tuple[tuple, object]] = []  # (cpus, gpus, node) and the actor of each party process a run left idle


def _start_host(cpus: float, gpus: float, node: str):
    import ray

    return ray.remote(PartyActor).options(num_cpus=cpus, num_gpus=gpus, **_placement(node)).remote(max(1, int(cpus)))


def _idle_hosts(wanted: list[tuple]) -> dict[tuple, list]:
    """The idle party processes a run of parties of ``wanted`` kinds (cpus, gpus, node) takes over, by kind; the others
    end. Each gets a new party runtime: only the process and its imports are kept."""
    import ray

    need: dict[tuple, int] = {}
    for kind in wanted:
        need[kind] = need.get(kind, 0) + 1
    taken: dict[tuple, list] = {}
    for kind, host in _IDLE:
        if need.get(kind, 0) > 0:
            need[kind] -= 1
            taken.setdefault(kind, []).append(host)
        else:
            ray.kill(host)
    _IDLE.clear()
    return taken
