"""Alice's prediction service: a finished run answers batches of IDs with predictions, for as long as it runs.

    python -m vcl.use.serve --out RUN_DIR --data.csv_files people_alice.csv people_bob.csv ... --listen 127.0.0.1:8080

It opens the run as ``train.py predict`` does (:class:`vcl.use.predict.Deployed`: every party built again where it runs,
with its own kept models and its own file of people, rows aligned by ID as in training), then serves HTTP with
JSON bodies (Python's own ``http.server``: a threaded server whose requests take turns at the parties; no
dependency beyond the standard library, and any HTTP client can ask):

- ``POST /predict`` with ``{"ids": ["p17", "p3"]}`` → ``{"predictions": [{"id": "p17", "prediction": "yes",
  "p": {"no": 0.12, "yes": 0.88}}, ...], "unknown": [...], "missing": [...], "round": 10}``: for each ID every
  organization's contribution on the row it holds for that ID (its kept models' outputs; one
  :class:`vcl.messages.PredictionRequest` per organization per batch, over the run's transport: mutually
  authenticated TLS under ``grpc``), combined by Alice's prediction stage. ``unknown``: IDs not every organization
  holds; ``missing``: organizations down (``--run.missing_parties skip``).
- ``GET /health`` → ``{"ready": true, "rows": N, "method": ..., "missing": [...]}``.

Bad requests get status 400 and ``{"error": one sentence}`` (a body that is not JSON or not ``{"ids": [strings]}``,
over ``--max-request-mb``, an unknown path: 404); a party lost mid-request is 503 with its sentence (with
``skip`` the service carries on without it); the service keeps serving whatever a client sends. It listens on
127.0.0.1 unless told otherwise and authenticates no client: put it behind your own gateway (TLS, logins) before
you open it to a network.
"""

from __future__ import annotations

import argparse
import inspect
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_REQUEST_MB = 16.0


class Service:
    """The opened run (:class:`vcl.use.predict.Deployed`) and its IDs' positions; :meth:`answer` scores one batch."""

    def __init__(self, deployed):
        import torch

        self.deployed, self.torch = deployed, torch
        self.position = {i: k for k, i in enumerate(deployed.ids)}
        self.lock = threading.Lock()  # the parties take one batch at a time

    def health(self) -> dict:
        d = self.deployed
        return {
            "ready": True,
            "rows": len(d.ids),
            "method": d.config.method,
            "missing": d.protocol.federation.missing(),
        }

    def answer(self, ids: list[str]) -> dict:
        known = [i for i in ids if i in self.position]
        unknown = [i for i in ids if i not in self.position]
        out = {"predictions": [], "unknown": unknown, "round": self.deployed.round}
        if known:
            rows = self.torch.tensor([self.position[i] for i in known], dtype=self.torch.long)
            with self.lock:
                scored = self.deployed.score(rows)
            out["predictions"] = self._rows(known, scored)
        out["missing"] = self.deployed.protocol.federation.missing()
        return out

    def _rows(self, ids: list[str], scored: dict) -> list[dict]:
        if scored["probabilities"] is None:  # regression
            return [{"id": i, "prediction": float(v)} for i, v in zip(ids, scored["F"][:, 0].tolist(), strict=True)]
        classes = self.deployed.classes
        best = scored["F"].argmax(1).tolist()
        return [
            {"id": i, "prediction": classes[b], "p": dict(zip(classes, p, strict=True))}
            for i, b, p in zip(ids, best, scored["probabilities"].tolist(), strict=True)
        ]


def handler(service: Service, limit: int):
    from vcl.errors import PartyLost, first_line

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else a reply's headers and body, sent apart, wait 40 ms for a delayed ACK

        def log_message(self, format, *args):  # one line per request would flood a busy service's output
            pass

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path != "/health":
                return self._send(404, {"error": f"no {self.path}; ask POST /predict or GET /health."})
            self._send(200, service.health())

        def do_POST(self):
            if self.path != "/predict":
                return self._send(404, {"error": f"no {self.path}; ask POST /predict or GET /health."})
            try:
                size = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self.close_connection = True
                return self._send(411, {"error": "the request has no Content-Length; send the JSON body with one."})
            if not 0 <= size <= limit:
                self.close_connection = True  # its body is not read
                return self._send(413, {"error": f"the body is over {limit} bytes; ask for fewer IDs per request."})
            try:
                body = json.loads(self.rfile.read(size))
            except (ValueError, RecursionError):
                return self._send(400, {"error": 'the body is not JSON; send {"ids": ["id1", "id2"]}.'})
            ids = body.get("ids") if isinstance(body, dict) else None
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                return self._send(400, {"error": 'the body needs "ids": a list of ID strings, as in the files.'})
            try:
                self._send(200, service.answer(ids))
            except PartyLost as err:
                self._send(503, {"error": f"{err}; ask again once it is back."})
            except Exception as err:  # the service keeps serving: the request fails in one sentence
                self._send(500, {"error": f"the prediction failed ({first_line(err, 300)})."})

    return Handler


def serve(deployed, listen: str = "127.0.0.1:0", max_request_mb: float = MAX_REQUEST_MB, ready=None) -> None:
    """Serve ``deployed`` on ``listen`` (``host:port``; port 0 picks a free one) until SIGTERM or Ctrl-C; ``ready``
    is called with the server once it listens."""
    host, _, port = listen.rpartition(":")
    server = ThreadingHTTPServer(
        (host or "127.0.0.1", int(port)), handler(Service(deployed), int(max_request_mb * 2**20))
    )
    server.daemon_threads = True
    if ready is not None:
        ready(server)
    try:
        server.serve_forever()
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    from vcl.errors import VCLInputError
    from vcl.use.predict import Deployed, add_run_arguments, one_sentence

    parser = argparse.ArgumentParser(prog="python -m vcl.use.serve", description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    parser.add_argument("--listen", default="127.0.0.1:8080", help="host:port to serve on (port 0: a free one)")
    parser.add_argument("--max-request-mb", type=float, default=MAX_REQUEST_MB, help="larger bodies are refused")
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535 or args.max_request_mb <= 0:
        print(f"error: --listen {args.listen} / --max-request-mb {args.max_request_mb}: give host:port with a port "
              "from 0 to 65535 and a size above 0.", file=sys.stderr)  # fmt: skip
        return 2
    signal.signal(signal.SIGTERM, _stop)
    opened = []

    def open_run() -> None:
        opened.append(Deployed(args.out, args.files, args.missing, tuple(args.allow_classes)))
        if "rows" not in inspect.signature(opened[0].protocol.predict).parameters:
            raise VCLInputError(
                f"method {opened[0].config.method} predicts whole splits only; serve a run of GAL, its other "
                "baselines or ASCII, or score files with train.py predict."
            )

    code = one_sentence(open_run, "start the service again once every party is up.")
    if code:
        if opened:
            opened[0].close()
        return code
    deployed = opened[0]

    def listening(server) -> None:
        host, port = server.server_address[:2]
        print(f"serving {args.out} ({len(deployed.ids)} people) on http://{host}:{port}", flush=True)

    try:
        serve(deployed, args.listen, args.max_request_mb, listening)
    except OSError as err:
        print(f"error: --listen {args.listen}: {err.strerror}; give a free port on this machine.", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    finally:
        deployed.close()
    return 0


def _stop(signum, frame):
    raise KeyboardInterrupt()


if __name__ == "__main__":
    sys.exit(main())
