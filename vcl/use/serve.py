"""Alice's prediction service: a finished run answers batches of IDs with predictions, for as long as it runs.

    python -m vcl.use.serve --out RUN_DIR --data.csv_files people_alice.csv people_bob.csv ... --listen 127.0.0.1:8080

``POST /predict`` (``{"ids": [...]}``), ``GET /health``, ``GET /live`` on uvicorn; the run is opened as ``train.py
predict`` opens it (:class:`vcl.use.predict.Deployed`). Limits, health and logs: docs/usage.md ("Serve predictions")."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import logging
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

MAX_REQUEST_MB = 16.0
LOG = logging.getLogger("vcl.serve")


@dataclass
class Limits:
    """What one request may ask of the service (the command's flags)."""

    max_request_mb: float = MAX_REQUEST_MB
    max_ids: int = 100_000  # IDs in one request
    timeout_s: float = 60.0  # to read a request's body, and for its batch to be scored
    concurrency: int = 64  # requests and connections at once (uvicorn's limit_concurrency)
    batch_ids: int = 100_000  # rows in one batch to the organizations (requests waiting are joined up to it)


class Refused(Exception):
    """A request the service answers with ``status`` and one sentence."""

    def __init__(self, status: int, sentence: str):
        super().__init__(sentence)
        self.status = status


class Scorer:
    """The opened run (:class:`vcl.use.predict.Deployed`) and its IDs' positions. One thread talks to the
    organizations; requests that wait while it does are joined into its next batch (:meth:`score`)."""

    def __init__(self, deployed, batch_ids: int):
        import torch

        self.deployed, self.torch, self.batch_ids = deployed, torch, batch_ids
        self.position = {i: k for k, i in enumerate(deployed.ids)}
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="vcl-serve")  # the parties take one batch at a time
        self.waiting: list[tuple[list[int], asyncio.Future]] = []
        self.draining: asyncio.Task | None = None

    async def score(self, rows: list[int]) -> dict:
        """``{"F", "probabilities", "missing"}`` of these rows (positions in :attr:`deployed`'s IDs), from the next
        batch."""
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((rows, future))
        if self.draining is None or self.draining.done():
            self.draining = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        torch, loop = self.torch, asyncio.get_running_loop()
        while self.waiting:
            batch, total = [], 0
            while self.waiting and (not batch or total + len(self.waiting[0][0]) <= self.batch_ids):
                batch.append(self.waiting.pop(0))
                total += len(batch[-1][0])
            unique = sorted({r for rows, _ in batch for r in rows})
            try:
                scored = await loop.run_in_executor(self.pool, self.deployed.score, torch.tensor(unique))
            except Exception as err:  # every request of the batch fails with it; the service goes on
                for _, future in batch:
                    if not future.done():
                        future.set_exception(err)
                continue
            at = {r: k for k, r in enumerate(unique)}
            for rows, future in batch:
                pick = torch.tensor([at[r] for r in rows], dtype=torch.long)
                p = scored["probabilities"]
                part = {"F": scored["F"][pick], "probabilities": None if p is None else p[pick]}
                if not future.done():
                    future.set_result({**part, "missing": scored["missing"]})

    async def organizations(self) -> dict:
        """{name: {"answers", "scores", "seconds"}}: each organization asked where it runs, on the scoring thread
        (after the batch at the organizations, if any)."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, self._ask_each)

    def _ask_each(self) -> dict:
        from vcl.errors import PartyLost, VCLInputError
        from vcl.messages import Where

        federation = self.deployed.protocol.federation
        transport, out = federation.transport, {}
        for name in federation.names:
            start = time.perf_counter()
            try:
                reply = transport.deliver([(name, Where(federation.alice, name, 0))])[0]
                answers = not isinstance(reply, Exception)
            except (PartyLost, VCLInputError):
                answers = False
            scores = name not in transport.missing
            out[name] = {"answers": answers, "scores": scores, "seconds": round(time.perf_counter() - start, 4)}
        return out

    def rows_json(self, ids: list[str], scored: dict) -> list[dict]:
        if scored["probabilities"] is None:  # regression
            return [{"id": i, "prediction": float(v)} for i, v in zip(ids, scored["F"][:, 0].tolist(), strict=True)]
        classes = self.deployed.classes
        best = scored["F"].argmax(1).tolist()
        return [
            {"id": i, "prediction": classes[b], "p": dict(zip(classes, p, strict=True))}
            for i, b, p in zip(ids, best, scored["probabilities"].tolist(), strict=True)
        ]

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def app(deployed, limits: Limits | None = None):
    """The service's ASGI application (Starlette): ``POST /predict``, ``GET /health`` and ``GET /live`` over
    ``deployed``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from vcl.errors import PartyLost, first_line

    limits = limits or Limits()
    scorer = Scorer(deployed, limits.batch_ids)
    size_limit = int(limits.max_request_mb * 2**20)

    def answer(request, status: int, body: dict, start: float, **fields) -> JSONResponse:
        client = request.client
        line = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "method": request.method, "path": request.url.path,
                "status": status, **fields, "seconds": round(time.perf_counter() - start, 4),
                "client": f"{client.host}:{client.port}" if client else None}  # fmt: skip
        if status >= 400:
            line["error"] = body.get("error")
        LOG.info(json.dumps(line))
        return JSONResponse(body, status_code=status)

    async def read(request) -> bytes:
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > size_limit):
            raise Refused(413, f"the body is over {size_limit} bytes; ask for fewer IDs per request.")
        chunks, total = [], 0
        async for chunk in request.stream():
            total += len(chunk)
            if total > size_limit:
                raise Refused(413, f"the body is over {size_limit} bytes; ask for fewer IDs per request.")
            chunks.append(chunk)
        return b"".join(chunks)

    def ids_of(body: bytes) -> list[str]:
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            raise Refused(400, 'the body is not JSON; send {"ids": ["id1", "id2"]}.') from None
        ids = parsed.get("ids") if isinstance(parsed, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise Refused(400, 'the body needs "ids": a list of ID strings, as in the files.')
        if len(ids) > limits.max_ids:
            raise Refused(413, f"{len(ids)} IDs in one request; ask for at most {limits.max_ids} (--max-ids).")
        return ids

    async def predict(request):
        start, ids = time.perf_counter(), []
        try:
            try:
                body = await asyncio.wait_for(read(request), limits.timeout_s)
            except asyncio.TimeoutError:
                raise Refused(408, f"the body did not arrive within {limits.timeout_s:g} s (--timeout-s).") from None
            ids = ids_of(body)
            known = [i for i in ids if i in scorer.position]
            unknown = [i for i in ids if i not in scorer.position]
            out = {"predictions": [], "unknown": unknown, "round": deployed.round}
            missing = deployed.protocol.federation.missing()
            if known:
                rows = [scorer.position[i] for i in known]
                try:
                    scored = await asyncio.wait_for(asyncio.shield(scorer.score(rows)), limits.timeout_s)
                except asyncio.TimeoutError:
                    raise Refused(504, f"the organizations did not score this batch within {limits.timeout_s:g} s "
                                  "(--timeout-s); ask again, or for fewer IDs.") from None  # fmt: skip
                out["predictions"] = await run_in_threadpool(scorer.rows_json, known, scored)
                missing = scored["missing"]
            out["missing"] = missing
            return answer(request, 200, out, start, ids=len(ids), unknown=len(unknown))
        except Refused as refused:
            return answer(request, refused.status, {"error": str(refused)}, start, ids=len(ids))
        except PartyLost as err:
            return answer(request, 503, {"error": f"{err}; ask again once it is back."}, start, ids=len(ids))
        except Exception as err:  # the service keeps serving: the request fails in one sentence
            body = {"error": f"the prediction failed ({first_line(err, 300)})."}
            return answer(request, 500, body, start, ids=len(ids))

    async def health(request):
        start = time.perf_counter()
        try:
            organizations = await asyncio.wait_for(scorer.organizations(), limits.timeout_s)
        except asyncio.TimeoutError:
            body = {"ready": False, "error": f"the organizations were not asked within {limits.timeout_s:g} s."}
            return answer(request, 503, body, start)
        ready = all(o["answers"] for o in organizations.values() if o["scores"])
        body = {
            "ready": ready,
            "rows": len(deployed.ids),
            "method": deployed.config.method,
            "round": deployed.round,
            "missing": deployed.protocol.federation.missing(),
            "organizations": organizations,
        }
        return answer(request, 200 if ready else 503, body, start)

    async def live(request):
        return answer(request, 200, {"live": True}, time.perf_counter())

    async def not_here(request, exc: HTTPException):
        start = time.perf_counter()
        if exc.status_code == 405:
            return answer(request, 405, {"error": f"{request.method} {request.url.path} is not served; ask POST "
                                         "/predict, GET /health or GET /live."}, start)  # fmt: skip
        return answer(request, 404, {"error": f"no {request.url.path}; ask POST /predict, GET /health or GET /live."},
                      start)  # fmt: skip

    @contextlib.asynccontextmanager
    async def lifespan(application):
        try:
            yield
        finally:
            scorer.close()

    routes = [
        Route("/predict", predict, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/live", live, methods=["GET"]),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: not_here}, lifespan=lifespan)


class Running:
    """A service that listens: its ``host`` and ``port``, and :meth:`stop`."""

    def __init__(self, server, sock: socket.socket):
        self.server, (self.host, self.port) = server, sock.getsockname()[:2]

    def stop(self) -> None:
        """Finish the requests in progress and stop listening (what SIGTERM and Ctrl-C do)."""
        self.server.should_exit = True


def bind(listen: str) -> socket.socket:
    """A socket listening on ``listen`` (``host:port``; port 0 picks a free one), bound before the run is opened, so
    that a port in use is said at once (:class:`OSError`)."""
    host, _, port = listen.rpartition(":")
    family, kind, proto, _, address = socket.getaddrinfo(
        host or "127.0.0.1", int(port), type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )[0]
    sock = socket.socket(family, kind, proto)  # proto named: asyncio sets TCP_NODELAY only on such sockets' connections
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def serve(deployed, listen: str | socket.socket = "127.0.0.1:0", limits: Limits | None = None, ready=None) -> None:
    """Serve ``deployed`` on ``listen`` (``host:port``, or a socket from :func:`bind`) with uvicorn until SIGTERM or
    Ctrl-C (in the main thread) or :meth:`Running.stop`; ``ready`` is called with the :class:`Running` service once
    uvicorn has started (from another thread)."""
    import uvicorn

    limits = limits or Limits()
    sock = bind(listen) if isinstance(listen, str) else listen
    config = uvicorn.Config(
        app(deployed, limits),
        http="h11",
        lifespan="on",
        limit_concurrency=limits.concurrency,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=max(1, int(limits.timeout_s)),
        access_log=False,  # the service's own JSON line per request instead
        log_level="warning",
        server_header=False,
    )
    server = uvicorn.Server(config)
    running = Running(server, sock)

    def tell() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.01)
        if server.started:
            ready(running)

    if ready is not None:
        threading.Thread(target=tell, name="vcl-serve-ready", daemon=True).start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


def main(argv: list[str] | None = None) -> int:
    from vcl.errors import VCLInputError, one_sentence
    from vcl.use.predict import Deployed, add_run_arguments

    parser = argparse.ArgumentParser(prog="python -m vcl.use.serve", description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    d = Limits()
    parser.add_argument("--listen", default="127.0.0.1:8080", help="host:port to serve on (port 0: a free one)")
    parser.add_argument("--max-request-mb", type=float, default=d.max_request_mb, help="larger bodies get 413")
    parser.add_argument("--max-ids", type=int, default=d.max_ids, help="more IDs in one request get 413")
    parser.add_argument("--timeout-s", type=float, default=d.timeout_s,
                        help="seconds to read a body (else 408) and to score its batch (else 504)")  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=d.concurrency,
                        help="requests and connections at once; more get 503")  # fmt: skip
    parser.add_argument("--batch-ids", type=int, default=d.batch_ids,
                        help="rows in a batch to the organizations (waiting requests join up to it)")  # fmt: skip
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        print(f"error: --listen {args.listen}: give host:port with a port from 0 to 65535.", file=sys.stderr)
        return 2
    limits = Limits(args.max_request_mb, args.max_ids, args.timeout_s, args.concurrency, args.batch_ids)
    for flag, value in (("--max-request-mb", limits.max_request_mb), ("--max-ids", limits.max_ids),
                        ("--timeout-s", limits.timeout_s), ("--concurrency", limits.concurrency),
                        ("--batch-ids", limits.batch_ids)):  # fmt: skip
        if not value > 0:
            print(f"error: {flag} {value}: give a number above 0.", file=sys.stderr)
            return 2
    if not LOG.handlers:  # one JSON line per request on standard error
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        LOG.addHandler(handler)
        LOG.setLevel(logging.INFO)
    try:
        sock = bind(args.listen)
    except OSError as err:
        print(f"error: --listen {args.listen}: {err.strerror}; give a free port on this machine.", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _stop)
    opened = []

    def open_run() -> None:
        opened.append(Deployed(args.out, args.files, args.missing, tuple(args.allow_classes)))
        deployed = opened[0]
        if "rows" not in inspect.signature(deployed.protocol.predict).parameters:
            raise VCLInputError(
                f"method {deployed.config.method} predicts whole splits only; serve a run of GAL, its baselines, "
                "ASCII, DC or MPDL, or score files with train.py predict."
            )
        if deployed.ids:
            import torch

            deployed.score(torch.tensor([0]))  # warm up; a method with no model for new rows says so here

    code = one_sentence(open_run, "start the service again once every party is up.")
    if code:
        sock.close()
        if opened:
            opened[0].close()
        return code
    deployed = opened[0]

    def listening(running: Running) -> None:
        print(f"serving {args.out} ({len(deployed.ids)} people) on http://{running.host}:{running.port}", flush=True)

    try:
        serve(deployed, sock, limits, listening)
    except KeyboardInterrupt:
        pass
    finally:
        deployed.close()
    return 0


def _stop(signum, frame):
    raise KeyboardInterrupt()


if __name__ == "__main__":
    sys.exit(main())
