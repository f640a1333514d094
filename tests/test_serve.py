"""python -m vcl.use.serve: Alice's prediction service answers batches of IDs with the predictions train.py predict
writes for them (GAL, Interm fusion, DC), joins concurrent requests into one batch, holds its limits, logs each
request as a JSON line, and keeps serving whatever a client sends."""

from __future__ import annotations

import asyncio
import csv
import http.client
import json
import logging
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.helpers import TINY_DC
from tests.test_predict import CSV, federation_files, moved_away, new_files_of_test_split, three_parties
from vcl.coordinator.runner import train
from vcl.use.predict import Deployed, predict
from vcl.use.serve import Limits, Scorer, main, serve


@contextmanager
def serving(deployed, limits: Limits | None = None):
    """``deployed`` served on a free port of 127.0.0.1 in this process; its port."""
    up, running = threading.Event(), []
    thread = threading.Thread(
        target=serve, args=(deployed,), kwargs={"limits": limits, "ready": lambda r: (running.append(r), up.set())}
    )
    thread.start()
    assert up.wait(30)
    try:
        yield running[0].port
    finally:
        running[0].stop()
        thread.join(30)


def trained_and_written(config, new: list[str], out, files: list | None = None) -> Deployed:
    """The run trained, then (its training ``files`` moved away, if given) scored by predict and opened to serve."""
    train(config, verbose=False)
    if files is not None:
        moved_away(files)
    predict(config.run_dir, new, out, verbose=False)
    return Deployed(config.run_dir, new)


@pytest.fixture
def service(tiny, tmp_path):
    """A finished GAL run on three organizations' files, served without them (moved away: each party built from its
    own checkpoint and its new rows); its port and the file train.py predict wrote."""
    files = federation_files(tmp_path / "data")
    config = tiny(**{**CSV, "data.csv_files": [str(f) for f in files], "run.rounds": 2})
    new = [str(f) for f in new_files_of_test_split(files, config, tmp_path / "new")]
    deployed = trained_and_written(config, new, tmp_path / "p.csv", files)
    with serving(deployed, Limits(max_ids=500)) as port:
        yield port, tmp_path / "p.csv"
    deployed.close()


def ask(port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    answer = response.status, json.loads(response.read())
    connection.close()
    return answer


def written(path) -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(open(path)))
    return rows[0], rows[1:]


def assert_as_written(answer: dict, header: list[str], rows: list[list[str]]) -> None:
    assert [p["id"] for p in answer["predictions"]] == [r[0] for r in rows]
    for p, row in zip(answer["predictions"], rows, strict=True):
        assert p["prediction"] == row[1]
        got = [p["p"][name[2:]] for name in header[2:]]
        np.testing.assert_allclose(got, np.array(row[2:], dtype=float), rtol=0, atol=1e-6)


def test_a_batch_of_ids_gets_the_predictions_that_predict_writes_for_them(service, caplog):
    port, path = service
    header, body = written(path)
    caplog.set_level(logging.INFO, logger="vcl.serve")
    status, health = ask(port, "GET", "/health")
    assert status == 200 and health["ready"] and health["rows"] == len(body) and health["method"] == "gal"
    assert {n: o["answers"] and o["scores"] for n, o in health["organizations"].items()} == {
        "alice": True, "bob": True, "carol": True,
    }  # fmt: skip
    batch = [body[5][0], "nobody", body[0][0], body[5][0]]
    status, answer = ask(port, "POST", "/predict", json.dumps({"ids": batch}).encode())
    assert status == 200 and answer["unknown"] == ["nobody"] and answer["missing"] == []
    assert_as_written(answer, header, [body[5], body[0], body[5]])
    status, answer = ask(port, "POST", "/predict", json.dumps({"ids": []}).encode())
    assert status == 200 and answer["predictions"] == []
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "vcl.serve"]
    assert [(x["method"], x["path"], x["status"], x.get("ids")) for x in lines] == [
        ("GET", "/health", 200, None), ("POST", "/predict", 200, 4), ("POST", "/predict", 200, 0),
    ]  # fmt: skip
    assert lines[1]["unknown"] == 1 and lines[1]["seconds"] >= 0 and lines[1]["client"].startswith("127.0.0.1:")


def test_concurrent_clients_each_get_their_own_rows(service):
    port, path = service
    header, body = written(path)
    batches = [body[k::6] for k in range(6)]

    def client(rows):
        return ask(port, "POST", "/predict", json.dumps({"ids": [r[0] for r in rows]}).encode())

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(client, batches * 3))
    for (status, answer), rows in zip(answers, batches * 3, strict=True):
        assert status == 200
        assert_as_written(answer, header, rows)


@pytest.mark.parametrize(
    "body, headers, status, words",
    [
        (b"{not json", None, 400, "not JSON"),
        (b'{"ids": "p1"}', None, 400, "list of ID strings"),
        (b'{"ids": [1, 2]}', None, 400, "list of ID strings"),
        (b"[" * 100_000, None, 400, "not JSON"),
        (b"{}", {"Content-Length": str(2**40)}, 413, "over"),
        (json.dumps({"ids": ["x"] * 501}).encode(), None, 413, "at most 500"),
    ],
)
def test_a_bad_request_is_one_sentence_and_the_service_keeps_serving(service, body, headers, status, words):
    port, _ = service
    got, answer = ask(port, "POST", "/predict", body, headers)
    assert got == status and words in answer["error"] and answer["error"].count(".") >= 1
    assert ask(port, "GET", "/nowhere")[0] == 404
    assert ask(port, "GET", "/predict")[0] == 405
    assert ask(port, "GET", "/health")[0] == 200  # still serving
    assert ask(port, "GET", "/live") == (200, {"live": True})


class Slow:
    """A stand-in for an opened run (:class:`vcl.use.predict.Deployed`) whose organizations take ``seconds`` to
    score a batch; each row's prediction is its position. ``calls``: the batches it was asked."""

    def __init__(self, rows: int, seconds: float):
        self.ids, self.round, self.classes = [f"p{k}" for k in range(rows)], 1, ["a", "b"]
        self.config = SimpleNamespace(method="gal")
        missing = SimpleNamespace(parties={})
        transport = SimpleNamespace(missing=missing, deliver=lambda requests: [object() for _ in requests])
        self.protocol = SimpleNamespace(federation=SimpleNamespace(missing=lambda: [], names=["alice"],
                                                                   alice="alice", transport=transport))  # fmt: skip
        self.seconds, self.calls = seconds, []

    def score(self, rows):
        self.calls.append(rows.tolist())
        time.sleep(self.seconds)
        F = torch.stack([rows.double(), -rows.double()], 1)
        return {"F": F, "probabilities": torch.softmax(F, 1), "missing": []}


def test_requests_that_wait_are_scored_in_one_batch():
    slow = Slow(100, 0.3)
    scorer = Scorer(slow, batch_ids=12)

    async def clients():
        first = asyncio.ensure_future(scorer.score([1, 2]))
        await asyncio.sleep(0.1)  # the first batch is at the organizations; these wait for the next
        rest = [scorer.score([k, k + 1, 50]) for k in range(10, 20, 2)]
        return await asyncio.gather(first, *rest)

    answers = asyncio.run(clients())
    scorer.close()
    assert slow.calls[0] == [1, 2]
    assert slow.calls[1] == [10, 11, 12, 13, 14, 15, 16, 17, 50]  # four requests, 12 rows asked, once each
    assert slow.calls[2] == [18, 19, 50]  # the fifth would have passed batch_ids
    for rows, answer in zip([[1, 2]] + [[k, k + 1, 50] for k in range(10, 20, 2)], answers, strict=True):
        assert answer["F"][:, 0].tolist() == rows


def test_a_batch_over_the_timeout_is_504_and_the_service_keeps_serving():
    slow = Slow(10, 1.0)
    with serving(slow, Limits(timeout_s=0.3)) as port:
        status, answer = ask(port, "POST", "/predict", json.dumps({"ids": ["p1"]}).encode())
        assert status == 504 and "within 0.3 s (--timeout-s)" in answer["error"]
        time.sleep(1.0)
        slow.seconds = 0.0
        status, answer = ask(port, "POST", "/predict", json.dumps({"ids": ["p3"]}).encode())
        assert status == 200 and answer["predictions"][0]["prediction"] == "a"


def test_a_body_that_does_not_arrive_is_408():
    with serving(Slow(10, 0.0), Limits(timeout_s=0.3)) as port:
        connection = socket.create_connection(("127.0.0.1", port), timeout=10)
        connection.sendall(b'POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"ids"')
        reply = b""
        while b"arrive" not in reply and (chunk := connection.recv(4096)):
            reply += chunk
        connection.close()
        reply = reply.decode()
        assert reply.startswith("HTTP/1.1 408") and "did not arrive within 0.3 s" in reply


@pytest.mark.slow
@pytest.mark.parametrize("method", ["interm", "dc_smote"])
def test_interm_and_dc_serve_what_predict_writes(tiny, tmp_path, method):
    if method == "interm":
        files = federation_files(tmp_path / "data")
        config = tiny(method=method, **{**CSV, "data.csv_files": [str(f) for f in files], "learner.model": ["mlp"]})
        new = [str(f) for f in new_files_of_test_split(files, config, tmp_path / "new")]
    else:
        config, new = tiny(method=method, **TINY_DC), []
    deployed = trained_and_written(config, new, tmp_path / "p.csv")
    header, body = written(tmp_path / "p.csv")
    try:
        with serving(deployed) as port:
            picked = [body[7], body[2], body[7], body[-1]]
            status, answer = ask(port, "POST", "/predict", json.dumps({"ids": [r[0] for r in picked]}).encode())
    finally:
        deployed.close()
    assert status == 200 and answer["unknown"] == []
    assert_as_written(answer, header, picked)


def test_bad_service_arguments_are_one_sentence_exit_2(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--listen", "nowhere"]) == 2
    assert "give host:port" in capsys.readouterr().err
    assert main(["--out", str(tmp_path), "--max-ids", "0", "--listen", "127.0.0.1:0"]) == 2
    assert "--max-ids 0: give a number above 0" in capsys.readouterr().err
    with socket.create_server(("127.0.0.1", 0)) as taken:  # said before the run is opened
        assert main(["--out", str(tmp_path), "--listen", f"127.0.0.1:{taken.getsockname()[1]}"]) == 2
        assert "give a free port" in capsys.readouterr().err
    assert main(["--out", str(tmp_path), "--listen", "127.0.0.1:0"]) == 2
    assert "holds no completed run" in capsys.readouterr().err


def test_the_service_socket_names_tcp_so_that_its_replies_are_not_held_back():
    """asyncio sets TCP_NODELAY only on connections of a socket whose protocol is IPPROTO_TCP; without it a reply's
    headers and body, written apart, waited ~40 ms for the client's delayed ACK (GET /live took 44 ms)."""
    from vcl.use.serve import bind

    with bind("127.0.0.1:0") as sock:
        assert sock.proto == socket.IPPROTO_TCP


@pytest.mark.slow
def test_health_says_which_organization_does_not_answer_under_grpc(tiny, tmp_path):
    """A served grpc run with run.missing_parties: skip: Carol's process ends; /health names her and is 503 while she
    still scores; the next batch goes on without her (missing), and /health is then ready without her."""
    with three_parties(tiny, tmp_path, **{"run.rounds": 2, "run.missing_parties": "skip"}) as (fed, config, _, new):
        deployed = trained_and_written(config, [str(new[0]), "bob", "carol"], tmp_path / "p.csv")
        _, body = written(tmp_path / "p.csv")
        try:
            with serving(deployed) as port:
                status, health = ask(port, "GET", "/health")
                assert status == 200 and all(o["answers"] for o in health["organizations"].values())
                fed.kill("carol")
                status, health = ask(port, "GET", "/health")
                assert status == 503 and not health["ready"] and health["organizations"]["carol"]["answers"] is False
                assert health["organizations"]["bob"]["answers"] is True
                status, answer = ask(port, "POST", "/predict", json.dumps({"ids": [body[0][0]]}).encode())
                assert status == 200 and answer["missing"] == ["carol"] and len(answer["predictions"]) == 1
                status, health = ask(port, "GET", "/health")
                assert status == 200 and health["missing"] == ["carol"]
                assert health["organizations"]["carol"] == {**health["organizations"]["carol"], "answers": False,
                                                            "scores": False}  # fmt: skip
        finally:
            deployed.close()
