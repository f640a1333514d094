"""The data path at scale: the command line reads the organizations' files while it imports torch and Lightning
(``read_ahead``); the join is one dictionary encoding of every file's IDs; a checkpoint keeps the row IDs as two tensors
and digests the data with SHA-256 (an earlier version's BLAKE2b digest still recognized)."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch
from vcl.datamodules import csv_files
from vcl.datamodules.csv_files import aligned, load_csv_organizations, read_ahead

import train as cli
from tests.conftest import write_csv
from vcl.errors import VCLInputError
from vcl.storage.checkpoints import pack_ids, unpack_ids


@pytest.fixture
def counted(monkeypatch):
    """How many times the files were read (the read ahead included)."""
    calls = []
    real = csv_files._load

    def load(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(csv_files, "_load", load)
    return calls


@pytest.mark.slow
def test_a_csv_run_takes_the_table_read_ahead_and_reads_no_file_twice(tmp_path, signal_csvs, counted):
    out = tmp_path / "run"
    argv = ["--data.dataset", "csv", "--data.task", "classification", "--data.csv_files", *signal_csvs,
            "--run.rounds", "1", "--learner.epochs", "2", "--compare", "--out", str(out), "--quiet"]  # fmt: skip
    assert cli.main(argv) == 0
    assert len(counted) == 1 and not csv_files._AHEAD
    assert (out / "results.json").is_file()


def test_a_read_ahead_is_taken_once_and_gives_what_a_read_gives(signal_csvs, counted):
    read_ahead(signal_csvs, task="classification")
    ahead = load_csv_organizations(signal_csvs, task="classification")
    again = load_csv_organizations(signal_csvs, task="classification")  # nothing left ahead: read afresh
    assert len(counted) == 2
    np.testing.assert_array_equal(ahead.matrix(), again.matrix())
    assert ahead.ids == again.ids and list(ahead.y) == list(again.y)


def test_a_file_changed_after_its_read_began_is_read_again(signal_csvs, counted):
    read_ahead(signal_csvs, task="classification")
    csv_files._AHEAD[next(iter(csv_files._AHEAD))].result()  # the read ahead is done
    lines = open(signal_csvs[1]).read().splitlines()
    write = [lines[0]] + [line.rsplit(",", 1)[0] + ",7.5" for line in lines[1:]]
    open(signal_csvs[1], "w").write("\n".join(write) + "\n")
    table = load_csv_organizations(signal_csvs, task="classification")
    assert len(counted) == 2 and (table.matrix()[:, -1] == 7.5).all()
    csv_files.forget_read_ahead()


def test_a_read_ahead_raises_its_sentence_where_the_table_is_taken(tmp_path, signal_csvs):
    bad = write_csv(tmp_path / "carol.csv", ["id", "c1"], [("p001", 1.0), ("p002", 2.0), ("p001", 3.0)])
    files = [*signal_csvs, str(bad)]
    with pytest.raises(VCLInputError) as direct:
        load_csv_organizations(files, task="classification")
    read_ahead(files, task="classification")
    with pytest.raises(VCLInputError) as ahead:
        load_csv_organizations(files, task="classification")
    assert str(ahead.value) == str(direct.value) and "repeats ID 'p001'" in str(direct.value)


def test_the_join_gives_each_files_row_of_each_shared_id_in_id_order():
    lists = [["c", "a", "b", "x"], ["b", "c", "y", "a"], ["a", "z", "c", "b"]]
    keys, rows = aligned(lists)
    assert keys.to_pylist() == ["a", "b", "c"]
    for ids, r in zip(lists, rows, strict=True):
        assert [ids[i] for i in r] == ["a", "b", "c"]
    keys, rows = aligned(lists, offered=[None, np.array([True, False, True, True]), None], least=1)  # no "c" in 2
    assert keys.to_pylist() == ["a", "b"] and [list(r) for r in rows] == [[1, 2], [3, 0], [0, 3]]


def test_given_ids_take_the_rows_a_hint_names_only_where_they_hold_those_ids(monkeypatch):
    """A party sent the aligned IDs and, from the PSI, the rows that hold them takes those rows without looking
    the IDs up, once the rows are checked to hold exactly them (all offered); any other hint is ignored."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.array(["d", "b", "a", "c"])
    given = pa.array(["a", "b", "d"])
    right = np.array([2, 1, 0])
    looked_up = []
    real = pc.index_in
    monkeypatch.setattr(pc, "index_in", lambda *a, **k: looked_up.append(1) or real(*a, **k))
    assert aligned([ids], given=given, hints=[(given, right)])[1][0].tolist() == [2, 1, 0] and not looked_up
    for wrong in (np.array([2, 1, 3]), np.array([2, 1]), np.array([2, 1, 4]), np.array([2, 1, -1])):
        assert aligned([ids], given=given, hints=[(given, wrong)])[1][0].tolist() == [2, 1, 0]
    assert aligned([ids], given=given, hints=[(pa.array(["a", "b", "c"]), right)])[1][0].tolist() == [2, 1, 0]
    unoffered = [np.array([True, False, True, True])]  # "b" is not offered (missing: drop)
    assert aligned([ids], unoffered, given=given, hints=[(given, right)])[1][0].tolist() == [2, -1, 0]
    offered = [np.array([True, True, True, True])]
    assert aligned([ids], offered, given=given, hints=[(given, right)])[1][0].tolist() == [2, 1, 0]
    assert len(looked_up) == 6  # every wrong hint, and none of the right ones


def test_a_party_takes_its_rows_from_the_places_alice_found_in_its_psi_offer(signal_csvs, monkeypatch):
    """grpc: the coordinator's PSI finds each aligned ID's place in a party's offer and sends the places with the
    Setup; the party's load takes its rows from them (no ID looked up), and the same rows as looking up gives.
    Places that are not of its offer are ignored (the IDs are looked up), whatever a peer sent."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from vcl.datamodules import reading

    from vcl.alignment.psi import PSISide
    from vcl.party.server import PartyServer
    from vcl.party.settings import PartySettings

    party = PartyServer(PartySettings(name="bob", listen="127.0.0.1:0", coordinator="alice", csv=signal_csvs[1]))
    alice = PSISide("alice", sorted(csv_files.csv_ids(signal_csvs[0]))[5:])  # Alice lacks five of bob's people
    answer = party.op_psi({"offer": alice.offer(), "drop": False, "label_column": "label", "new": False}, "alice")
    alice.answer(answer["offer"])
    rows, places = alice.shared(answer["twice"])
    ids = pa.array([alice.ids[r] for r in rows])  # Alice's IDs are sorted: so are the aligned ones
    looked_up = []
    real = pc.index_in
    monkeypatch.setattr(pc, "index_in", lambda *a, **k: looked_up.append(1) or real(*a, **k))

    def bobs_table(places_sent):
        reading.use_places(signal_csvs[1], ids, places_sent)
        return load_csv_organizations(signal_csvs, "id", "label", "classification", only=1, ids=ids)

    hinted = bobs_table(places)
    assert not looked_up and len(hinted.ids) == 115 and reading._KEPT == {}
    looked = load_csv_organizations(signal_csvs, "id", "label", "classification", only=1, ids=ids)
    assert looked_up and np.array_equal(hinted.matrix(), looked.matrix())
    for sent in (places[::-1].copy(), places.astype(float), np.full(len(places), 10**6), "rows", None):
        party.op_psi({"offer": alice.offer(), "drop": False, "label_column": "label", "new": False}, "alice")
        looked_up.clear()
        assert np.array_equal(bobs_table(sent).matrix(), looked.matrix()) and looked_up


def test_the_coordinator_sends_each_party_the_places_of_the_aligned_ids_in_its_own_offer(
    tiny, signal_csvs, tmp_path, monkeypatch
):
    """vcl.coordinator.assembly.coordinator_data: after the star PSI and the intersection, each party's places
    (VerticalData.places, which grpc sends with its Setup) are where each aligned ID sits in that party's shuffled
    offer; Alice's are her rows among her IDs. The data's digest does not hold them (a resumed run has none)."""
    from vcl.datamodules import reading

    import vcl.coordinator.assembly
    from vcl.alignment.psi import answer_from_file
    from vcl.coordinator.digest import data_digest

    rng = np.random.default_rng(1)
    carol = write_csv(tmp_path / "carol.csv", ["id", "c1"], [[f"p{i:03d}", i] for i in rng.permutation(110) + 7])
    files = [*signal_csvs, str(carol)]

    class Apart:
        @staticmethod
        def psi_answers(config, names, drop, offer, new=False):  # each party's half, here, its read kept
            return [answer_from_file(f, "id", False, "label", offer, keep=True) for f in files[1:]]

    monkeypatch.setattr(vcl.coordinator.assembly, "transport_class", lambda kind: Apart)
    config = tiny(**{"data.dataset": "csv", "data.task": "classification", "data.csv_files": files})
    data = vcl.coordinator.assembly.coordinator_data(config)
    assert data.ids == [f"p{i:03d}" for i in range(7, 117)] and list(data.places) == ["alice", "bob", "carol"]
    alice_ids = csv_files.csv_ids(files[0])
    assert [alice_ids[k] for k in data.places["alice"]] == data.ids
    for f in files[1:]:
        own = reading._KEPT[Path(f).absolute()][1]
        assert own.ids.take(own.offer_rows[data.places[Path(f).stem]]).to_pylist() == data.ids
    assert data_digest(data) == data_digest(replace(data, places=None))
    reading._KEPT.clear()


def test_packed_ids_come_back_and_a_crafted_field_is_refused(tmp_path):
    ids = ["p1", "Zoë", "😀-7", "x" * 300]
    packed = pack_ids(ids)
    assert set(packed) == {"utf8", "ends"} and packed["utf8"].dtype == torch.uint8
    path = tmp_path / "last.ckpt"
    torch.save({"ids": packed}, path)
    assert unpack_ids(torch.load(path, weights_only=True)["ids"], path) == ids
    assert unpack_ids(ids, path) == ids and unpack_ids(None, path) is None  # an earlier version's list
    arrow = pa.array(["before", *ids])[1:]  # the IDs as a run holds them: an Arrow array (here a slice of one)
    assert {k: t.tolist() for k, t in pack_ids(arrow).items()} == {k: t.tolist() for k, t in packed.items()}
    crafted = [
        {"utf8": packed["utf8"], "ends": packed["ends"] + 5},  # ends past the bytes
        {"utf8": packed["utf8"], "ends": packed["ends"].flip(0)},  # ends going back
        {"utf8": torch.tensor([0xFF, 0xFE], dtype=torch.uint8), "ends": torch.tensor([2])},  # not UTF-8
        {"utf8": packed["utf8"].float(), "ends": packed["ends"]},
        "p1",
    ]
    for field in crafted:
        with pytest.raises(VCLInputError, match="keeps row IDs that are not text"):
            unpack_ids(field, path)


def test_a_checkpoint_of_an_earlier_version_blake2b_digest_still_recognizes_its_data():
    from vcl.config import RunConfig
    from vcl.coordinator.digest import data_digest
    from vcl.coordinator.runner import data_differ, kept_digest
    from vcl.family import family_of

    config = RunConfig.from_dict({"data.dataset": "wine"})
    data, changed = {"x": np.arange(10.0), "ids": ["a", "b"]}, {"x": np.arange(10.0), "ids": ["a", "c"]}
    earlier = {"transport": "local", "digest": data_digest(data, "blake2b", 1)}  # no version named: 1
    assert not data_differ(earlier, config, data) and data_differ(earlier, config, changed)
    now = kept_digest(config, data, family_of(config))
    assert now["hash"] == "sha256" and not data_differ(now, config, data) and data_differ(now, config, changed)
    assert not data_differ({**now, "transport": "grpc"}, config, changed)  # another transport's data: not compared
    many = [f"p{i}'\"ë" for i in range(70_000)]  # a run holds its IDs in Arrow now: digested as their list was
    assert (
        data_digest({"ids": pa.array(many)}) == data_digest({"ids": many}) != data_digest({"ids": pa.array(many[1:])})
    )
    assert data_digest({"ids": pa.array(many, pa.large_string())}) == data_digest({"ids": many})
    for version in (2, 3):  # each version's own digest of the same data: the same each time, another for other data
        assert data_digest(data, "sha256", version) == data_digest(dict(data), "sha256", version)
        assert data_digest(data, "sha256", version) != data_digest(changed, "sha256", version)
    assert data_digest(data, "sha256", 2) != data_digest(data)  # version 3 digests otherwise


def test_a_digest_of_version_3_takes_every_piece_and_every_id_boundary(monkeypatch):
    """Version 3 digests an array's bytes a piece at a time (on every core): a change in any piece, or one byte of
    one ID moved into the next, makes another digest; the pieces' size does not change what it sees."""
    from vcl.coordinator import digest

    x = np.arange(1000, dtype=np.float32)
    monkeypatch.setattr(digest, "PIECE", 64)
    small = digest.data_digest({"x": x, "ids": ["ab", "c"]})
    assert small == digest.data_digest({"x": x.copy(), "ids": pa.array(["ab", "c"])})
    y = x.copy()
    y[-1] = -1  # the last piece's
    assert digest.data_digest({"x": y, "ids": ["ab", "c"]}) != small
    assert digest.data_digest({"x": x, "ids": ["a", "bc"]}) != small
    assert digest.data_digest({"x": x, "ids": pa.array(["ab", "c", "d"])[:2]}) == small  # a slice of an array


def test_a_file_read_for_the_row_alignment_is_kept_for_the_load_on_the_aligned_rows(tmp_path, monkeypatch):
    """A party's half of the PSI reads its whole file; its Setup's load on the aligned rows takes that read (once)
    instead of reading the file again, unless the file changed meanwhile; a read not asked to be kept is not."""
    import os

    from vcl.datamodules import reading

    alice = write_csv(tmp_path / "alice.csv", ["id", "a", "label"], [[f"p{i}", i, i % 2] for i in range(6)])
    bob = write_csv(tmp_path / "bob.csv", ["id", "b"], [[f"p{i}", 10 * i] for i in (5, 3, 1, 0, 2, 4)])
    reads = []
    real = reading.read_file
    monkeypatch.setattr(reading, "read_file", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    ids = sorted(csv_files.csv_ids(bob, keep=True))

    def bobs_column():
        return load_csv_organizations([alice, bob], "id", "label", "classification", only=1, ids=ids).matrix()[:, 0]

    assert np.array_equal(bobs_column(), [0, 10, 20, 30, 40, 50]) and reads == []  # the kept read, taken
    assert np.array_equal(bobs_column(), [0, 10, 20, 30, 40, 50]) and len(reads) == 1  # nothing kept: read
    csv_files.csv_ids(bob, keep=True)
    write_csv(bob, ["id", "b"], [[f"p{i}", 11 * i] for i in (5, 3, 1, 0, 2, 4)])
    os.utime(bob, ns=(os.stat(bob).st_atime_ns, os.stat(bob).st_mtime_ns + 10**9))  # changed since it was kept
    assert np.array_equal(bobs_column(), [0, 11, 22, 33, 44, 55]) and len(reads) == 2
    csv_files.csv_ids(bob)
    assert reading._KEPT == {}


def test_a_party_set_up_again_for_the_same_config_and_rows_takes_the_data_it_loaded(tiny, signal_csvs, counted):
    """vcl.party.loading.party_data: a party process set up for a --compare method after the main one (the same
    config, the same aligned rows) loads nothing again, as one process holding every party does; other rows, another
    config or a changed file are loaded afresh. Each setup gets its views' splits in dicts of its own."""
    import os

    import pyarrow as pa

    from vcl.party.loading import party_data

    config = tiny(**{"data.dataset": "csv", "data.task": "classification", "data.csv_files": signal_csvs})
    ids = pa.array(sorted(csv_files.csv_ids(signal_csvs[1])))
    first = party_data(config, "gal", 1, ids, "classification", 2)
    again = party_data(config, "alone", 1, pa.array(ids.to_pylist()), "classification", 2)
    assert len(counted) == 1 and again.views[1].splits["train"] is first.views[1].splits["train"]
    again.views[1].splits["new"] = torch.zeros(1, 2)
    assert "new" not in party_data(config, "gal", 1, ids, "classification", 2).views[1].splits and len(counted) == 1
    party_data(config, "gal", 1, ids[1:], "classification", 2)
    assert len(counted) == 2  # other rows
    party_data(tiny(**{"data.dataset": "csv", "data.task": "classification", "data.csv_files": signal_csvs,
                       "data.split_seed": 7}), "gal", 1, ids[1:], "classification", 2)  # fmt: skip
    assert len(counted) == 3  # another config
    party_data(config, "gal", 1, ids, "classification", 2)
    stat = os.stat(signal_csvs[1])
    os.utime(signal_csvs[1], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    party_data(config, "gal", 1, ids, "classification", 2)
    assert len(counted) == 5  # the file changed


def test_alices_own_party_reads_her_file_during_the_psi_and_its_setup_takes_that_read(signal_csvs, monkeypatch):
    """Under grpc Alice's coordinator aligns the rows with the other parties while her own party process, asked
    without an offer (vcl.transports.grpc.psi_answers), reads her file and keeps it for its Setup's load."""
    from pathlib import Path

    from vcl.datamodules import reading

    from vcl.party.server import PartyServer
    from vcl.party.settings import PartySettings

    party = PartyServer(PartySettings(name="alice", listen="127.0.0.1:0", coordinator="alice", csv=signal_csvs[0]))
    answer = party.op_psi({"offer": None, "drop": False, "label_column": "label", "new": False}, "alice")
    assert answer == {"rows": 120} and list(reading._KEPT) == [Path(signal_csvs[0]).absolute()]
    ids = sorted(csv_files.csv_ids(signal_csvs[1]))
    reads = []
    real = reading.read_file
    monkeypatch.setattr(reading, "read_file", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    table = load_csv_organizations(signal_csvs, "id", "label", "classification", only=0, ids=ids)
    assert reads == [] and reading._KEPT == {} and table.matrix().shape == (120, 2)  # the kept read, taken
