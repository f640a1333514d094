"""ECDH private set intersection over X25519 (vcl/alignment/psi.py): the intersection exactly, rows aligned, and nothing
but blinded values crossing."""

import hashlib

import numpy as np
import pytest

from vcl.alignment.psi import POINT, TAG, PSISide, decode, hash_to_curve, intersect
from vcl.errors import VCLInputError


def test_each_side_learns_exactly_the_intersection_with_rows_aligned():
    rng = np.random.default_rng(0)
    universe = [f"customer-{i}" for i in range(5000)]
    a_ids = list(rng.choice(universe, 1200, replace=False))
    b_ids = list(rng.choice(universe, 3000, replace=False))
    a_rows, b_rows = intersect(PSISide("a", a_ids, workers=2), PSISide("b", b_ids, workers=2))
    shared = sorted(set(a_ids) & set(b_ids))
    assert len(shared) > 100
    assert [a_ids[r] for r in a_rows] == shared == [b_ids[r] for r in b_rows]


def test_the_centre_of_a_star_takes_its_shared_rows_in_its_own_order():
    """vcl.coordinator.assembly.psi_with_parties intersects every party's share of Alice's IDs and sorts them once:
    Alice's shared_rows are match's rows in her file's order."""
    a_ids, b_ids = [f"p{i}" for i in (9, 4, 7, 1, 3)], [f"p{i}" for i in (3, 8, 9, 1)]
    a, b = PSISide("a", a_ids), PSISide("b", b_ids)
    offer_a, offer_b = a.offer(), b.offer()
    back_to_a = b.answer(offer_a)
    a.answer(offer_b)
    assert a.shared_rows(back_to_a).tolist() == [0, 3, 4] and a.match(back_to_a).tolist() == [3, 4, 0]  # p1 p3 p9


def test_the_centre_learns_where_each_shared_id_sits_in_the_other_sides_offer():
    """psi_with_parties sends each party back the places in its offer of the shared IDs; only that party's secret
    order turns them into its rows, which hold the same IDs as the centre's rows."""
    a_ids, b_ids = [f"p{i}" for i in (9, 4, 7, 1, 3)], [f"p{i}" for i in (3, 8, 9, 1, 6)]
    a, b = PSISide("a", a_ids), PSISide("b", b_ids)
    back_to_a = b.answer(a.offer())
    a.answer(b.offer())
    rows, places = a.shared(back_to_a)
    assert rows.tolist() == [0, 3, 4] and len(places) == 3
    assert [b_ids[k] for k in b.offer_rows()[places]] == [a_ids[r] for r in rows] == ["p9", "p1", "p3"]


def test_disjoint_and_empty_sets():
    a_rows, b_rows = intersect(PSISide("a", ["x", "y"]), PSISide("b", ["z"]))
    assert len(a_rows) == len(b_rows) == 0
    a_rows, b_rows = intersect(PSISide("a", []), PSISide("b", ["z"]))
    assert len(a_rows) == len(b_rows) == 0


def test_what_crosses_is_neither_an_id_nor_its_hash_and_depends_on_the_secret():
    """A receiver holding candidate IDs can hash them itself; the blinded values it receives match no hash, and the
    same IDs under another secret give other values (the secret is the side's own, from the OS). IDs of 13 bytes:
    a 3-byte one such as "id0" turns up by chance in 300 random 32-byte values about once in 170 runs."""
    ids = [f"person-{i:06d}" for i in range(300)]
    side = PSISide("a", ids)
    sent = decode(side.offer())
    hashes = set(hash_to_curve(ids)) | {hashlib.sha256(i.encode()).digest() for i in ids}
    assert len(sent) == len(ids) and not hashes & set(sent)
    assert not any(i.encode() in b"".join(sent) for i in ids)
    assert not set(sent) & set(decode(PSISide("a", ids).offer()))  # a fresh side: a fresh secret
    assert hash_to_curve(["id0"])[0] == hashlib.sha256(TAG + b"id0").digest()


def test_blinding_commutes_and_keeps_order_across_threads():
    ids = [f"id{i}" for i in range(5000)]
    a, b = PSISide("a", ids, secret=b"\x01" * POINT, workers=3), PSISide("b", ids, secret=b"\x02" * POINT, workers=1)
    hashed = hash_to_curve(ids)
    assert a.blind(b.blind(hashed)) == b.blind(a.blind(hashed))


def test_bad_input_is_refused():
    with pytest.raises(VCLInputError, match="not unique"):
        PSISide("b", ["x", "x"])
    with pytest.raises(VCLInputError, match="each value is 32 bytes"):
        decode(np.zeros((3, 31), dtype=np.uint8))


def test_the_benchmark_keeps_its_records_and_says_the_targets(tmp_path):
    from tests.helpers import benchmark

    psi = benchmark("psi")
    record = psi.one(500, repeats=1)
    assert record["benchmark"] == "psi" and record["ids"] == 500 and record["shared"] == 250
    assert record["seconds"] > 0 and record["protocol"] == "ecdh-x25519"
    slow = dict(record, ids=10**5, seconds=7.0)
    assert "NOT met" in psi.report([slow]) and "≤ 6 s: met" in psi.report([dict(slow, seconds=5.0)])
