"""python -m vcl.use.serve: Alice's prediction service answers batches of IDs with the predictions train.py predict
writes for them, and keeps serving whatever a client sends."""

from __future__ import annotations

import csv
import http.client
import json
import threading

import numpy as np
import pytest

from tests.test_predict import CSV, federation_files, new_files_of_test_split
from vcl.coordinator.runner import train
from vcl.use.predict import Deployed, predict
from vcl.use.serve import main, serve


@pytest.fixture
def service(tiny, tmp_path):
    """A finished GAL run on three organizations' files, served on a free port of 127.0.0.1 in this process."""
    files = federation_files(tmp_path / "data")
    config = tiny(**{**CSV, "data.csv_files": [str(f) for f in files], "run.rounds": 2})
    train(config, verbose=False)
    new = [str(f) for f in new_files_of_test_split(files, config, tmp_path / "new")]
    predict(config.run_dir, new, tmp_path / "p.csv", verbose=False)
    deployed = Deployed(config.run_dir, new)
    up = threading.Event()
    servers = []
    thread = threading.Thread(target=serve, args=(deployed,), kwargs={"ready": lambda s: (servers.append(s), up.set())})
    thread.start()
    up.wait(30)
    yield servers[0].server_address[1], tmp_path / "p.csv"
    servers[0].shutdown()
    thread.join(30)
    deployed.close()


def ask(port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    answer = response.status, json.loads(response.read())
    connection.close()
    return answer


def test_a_batch_of_ids_gets_the_predictions_that_predict_writes_for_them(service):
    port, written = service
    rows = list(csv.reader(open(written)))
    header, body = rows[0], rows[1:]
    status, health = ask(port, "GET", "/health")
    assert status == 200 and health["ready"] and health["rows"] == len(body) and health["method"] == "gal"
    batch = [body[5][0], "nobody", body[0][0], body[5][0]]
    status, answer = ask(port, "POST", "/predict", json.dumps({"ids": batch}).encode())
    assert status == 200 and answer["unknown"] == ["nobody"] and answer["missing"] == []
    assert [p["id"] for p in answer["predictions"]] == [body[5][0], body[0][0], body[5][0]]
    for p, row in zip(answer["predictions"], [body[5], body[0], body[5]], strict=True):
        assert p["prediction"] == row[1]
        got = [p["p"][name[2:]] for name in header[2:]]
        np.testing.assert_allclose(got, np.array(row[2:], dtype=float), rtol=0, atol=1e-9)
    status, answer = ask(port, "POST", "/predict", json.dumps({"ids": []}).encode())
    assert status == 200 and answer["predictions"] == []


@pytest.mark.parametrize(
    "body, headers, status, words",
    [
        (b"{not json", None, 400, "not JSON"),
        (b'{"ids": "p1"}', None, 400, "list of ID strings"),
        (b'{"ids": [1, 2]}', None, 400, "list of ID strings"),
        (b"[" * 100_000, None, 400, "not JSON"),
        (b"{}", {"Content-Length": str(2**40)}, 413, "over"),
    ],
)
def test_a_bad_request_is_one_sentence_and_the_service_keeps_serving(service, body, headers, status, words):
    port, _ = service
    got, answer = ask(port, "POST", "/predict", body, headers)
    assert got == status and words in answer["error"] and answer["error"].count(".") >= 1
    assert ask(port, "GET", "/nowhere")[0] == 404
    assert ask(port, "GET", "/health")[0] == 200  # still serving


def test_bad_service_arguments_are_one_sentence_exit_2(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--listen", "nowhere"]) == 2
    assert "give host:port" in capsys.readouterr().err
    assert main(["--out", str(tmp_path)]) == 2
    assert "holds no completed run" in capsys.readouterr().err
