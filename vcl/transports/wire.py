"""Messages as bytes for a transport that crosses machines: data, never code.

A frame is ``VCLW`` + a 4-byte header length + a JSON header + the tensors' raw bytes; the header's kind is looked up
in the table of registered message classes, so nothing in a frame chooses code to run. :func:`unpack` refuses
anything else with :class:`WireError`. What crosses and what is refused: docs/deployment.md."""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import struct
import sys

import numpy as np
import pyarrow as pa
import torch

import vcl.messages
from vcl.datamodules.reading import string_array
from vcl.messages import Message

MAGIC = b"VCLW"
SERVICE = "vcl.Party"  # the gRPC service a party serves frames on (one method per operation)
VERSION = 1
DTYPES = {
    name: getattr(torch, name)
    for name in ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
}
TEXTS_AS_BYTES = 256  # a list of at least this many texts crosses as bytes (row IDs at scale), not in the header
HEADER_MB = 8.0  # a header (JSON) over this is refused before it is decoded: decoding costs some 50 times its size
NUMPY = {"float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"}


class WireError(ValueError):
    """A frame that is not a well-formed message (refused; the receiver keeps serving)."""


_TABLE: dict[str, type[Message]] = {}  # every kind a frame may name: vcl.messages' own, then the families'


def register_messages(classes) -> None:
    """Add a family's message classes (and their subclasses) to the table a frame's kind is looked up in; a family
    registers its own when it is loaded (:func:`vcl.family.load_family`). Two classes of one name are refused."""
    table = message_classes()
    todo = list(classes)
    while todo:
        cls = todo.pop()
        if not (isinstance(cls, type) and issubclass(cls, Message)):
            raise TypeError(f"{cls!r} is not a vcl.messages.Message subclass")
        known = table.get(cls.__name__)
        if known is not None and known is not cls:
            raise TypeError(f"two message classes are named {cls.__name__}: {known.__module__} and {cls.__module__}")
        table[cls.__name__] = cls
        todo.extend(cls.__subclasses__())


def message_classes() -> dict[str, type[Message]]:
    """Every message kind by its class name: those of :mod:`vcl.messages` and those the loaded families
    registered (the table itself; read it, and add to it through :func:`register_messages` only)."""
    if not _TABLE:
        todo = [Message]
        while todo:
            cls = todo.pop()
            if cls.__module__ == vcl.messages.__name__:
                _TABLE[cls.__name__] = cls
            todo.extend(cls.__subclasses__())
    return _TABLE


def _encode(value, arrays: list):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, torch.Tensor):
        arrays.append(value.detach().to("cpu").contiguous())
        return {"$t": len(arrays) - 1}
    if isinstance(value, np.ndarray):
        if value.dtype.name not in NUMPY:
            raise TypeError(f"a NumPy array of dtype {value.dtype} cannot cross: only {sorted(NUMPY)}")
        arrays.append(torch.from_numpy(np.array(value, order="C", copy=True)))  # its own (writable) copy
        return {"$a": len(arrays) - 1}
    if isinstance(value, tuple):
        return {"$tuple": [_encode(v, arrays) for v in value]}
    if "pyarrow" in sys.modules and isinstance(value, sys.modules["pyarrow"].Array):
        arrays.extend(_text_buffers(value))
        return {"$S": [len(arrays) - 2, len(arrays) - 1]}
    if isinstance(value, list):
        if len(value) >= TEXTS_AS_BYTES and all(type(v) is str for v in value):  # row IDs: bytes, not header
            raw = [v.encode("utf-8", "surrogatepass") for v in value]
            arrays.append(torch.from_numpy(np.frombuffer(b"".join(raw), dtype=np.uint8).copy()))
            arrays.append(torch.tensor([len(r) for r in raw], dtype=torch.int64))
            return {"$s": [len(arrays) - 2, len(arrays) - 1]}
        return [_encode(v, arrays) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: _encode(v, arrays) for k, v in value.items()}
        return {"$dict": [[_encode(k, arrays), _encode(v, arrays)] for k, v in value.items()]}
    raise TypeError(f"a {type(value).__name__} cannot cross: messages carry tensors, arrays, numbers and text")


def _decode(value, arrays: list):
    if isinstance(value, list):
        return [_decode(v, arrays) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, inner),) = value.items()
        if key in ("$t", "$a"):
            if not isinstance(inner, int) or isinstance(inner, bool) or not 0 <= inner < len(arrays):
                raise WireError(f"a tensor reference {inner!r} names no tensor of the frame")
            return arrays[inner] if key == "$t" else arrays[inner].numpy()
        if key == "$s":
            return _texts(inner, arrays)
        if key == "$S":
            return _text_array(inner, arrays)
        if key == "$tuple" and isinstance(inner, list):
            return tuple(_decode(v, arrays) for v in inner)
        if key == "$dict" and isinstance(inner, list):
            if not all(isinstance(p, list) and len(p) == 2 for p in inner):
                raise WireError("a $dict is not a list of key-value pairs")
            return {_key(_decode(k, arrays)): _decode(v, arrays) for k, v in inner}
    return {k: _decode(v, arrays) for k, v in value.items()}


def _text_buffers(array) -> tuple[torch.Tensor, torch.Tensor]:
    """An Arrow array of texts as what a ``$S`` carries: its UTF-8 bytes end to end, and each text's length."""

    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)) or array.null_count:
        raise TypeError(f"an Arrow array of {array.type} cannot cross: only texts, none missing")
    _, offsets, data = array.buffers()
    kind = np.dtype(np.int64 if pa.types.is_large_string(array.type) else np.int32)
    ends = np.frombuffer(offsets, dtype=kind, count=len(array) + 1, offset=array.offset * kind.itemsize)
    raw = np.frombuffer(data, dtype=np.uint8)[ends[0] : ends[-1]] if data is not None else np.empty(0, np.uint8)
    return torch.from_numpy(raw.copy()), torch.from_numpy(np.diff(ends).astype(np.int64))


def _text_parts(inner, arrays: list) -> tuple[torch.Tensor, np.ndarray]:
    """The bytes and lengths a ``$s`` or ``$S`` names, checked: every length within the bytes, adding up to them."""
    ok = isinstance(inner, list) and len(inner) == 2 and all(type(k) is int and 0 <= k < len(arrays) for k in inner)
    if not ok:
        raise WireError("a list of texts does not name its two tensors")
    raw, lengths = (arrays[k] for k in inner)
    if raw.dtype != torch.uint8 or lengths.dtype != torch.int64 or raw.dim() != 1 or lengths.dim() != 1:
        raise WireError("a list of texts is not bytes and their lengths")
    sizes = lengths.numpy()
    if not (((sizes >= 0) & (sizes <= raw.numel())).all() and int(sizes.sum()) == raw.numel()):  # no overflow
        raise WireError("a list of texts' lengths do not add up to its bytes")
    return raw, sizes


def _texts(inner, arrays: list) -> list[str]:
    """A list of texts that crossed as one array of their UTF-8 bytes and one of their lengths."""
    raw, sizes = _text_parts(inner, arrays)
    data, texts, start = raw.numpy().tobytes(), [], 0
    try:
        for size in sizes.tolist():
            texts.append(data[start : start + size].decode("utf-8", "surrogatepass"))
            start += size
    except UnicodeDecodeError:
        raise WireError("a $s holds bytes that are not UTF-8") from None
    return texts


def _text_array(inner, arrays: list):
    """An Arrow array of texts that crossed as their bytes and lengths (:func:`_text_buffers`), its UTF-8 checked."""

    raw, sizes = _text_parts(inner, arrays)
    ends = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ends[1:])
    large = ends[-1] >= 2**31
    kind, offsets = (pa.large_string(), ends) if large else (pa.string(), ends.astype(np.int32))
    array = pa.Array.from_buffers(kind, len(sizes), [None, pa.py_buffer(offsets), pa.py_buffer(raw.numpy())])
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        raise WireError("a $S holds bytes that are not UTF-8") from None
    return array


def _key(key):
    if isinstance(key, (list, dict, torch.Tensor, np.ndarray)):
        raise WireError("a dict key is not a number, text or tuple")
    return key


def pack(kind: str, value) -> bytes:
    """``value`` (a message's fields, or an operation's arguments) as one frame of ``kind``."""
    arrays: list[torch.Tensor] = []
    body = _encode(value, arrays)
    specs = [{"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)} for t in arrays]
    for spec in specs:
        if spec["dtype"] not in DTYPES:
            raise TypeError(f"a tensor of dtype {spec['dtype']} cannot cross: only {sorted(DTYPES)}")
    header = json.dumps({"v": VERSION, "kind": kind, "body": body, "tensors": specs}, separators=(",", ":")).encode()
    raw = [t.view(torch.uint8).numpy().tobytes() if t.numel() else b"" for t in (a.reshape(-1) for a in arrays)]
    return b"".join([MAGIC, struct.pack("<I", len(header)), header, *raw])


def unpack(frame: bytes, limit: int | None = None) -> tuple[str, object]:
    """The ``(kind, value)`` a frame holds; :class:`WireError` for anything else, whatever the bytes (a header
    nested past Python's recursion limit, a shape whose product overflows, values no tensor can hold)."""
    try:
        return _unpack(frame, limit)
    except WireError:
        raise
    except (RecursionError, OverflowError, IndexError, ValueError, TypeError, RuntimeError, MemoryError) as err:
        raise WireError(f"the frame is malformed ({type(err).__name__})") from None


def _unpack(frame: bytes, limit: int | None) -> tuple[str, object]:
    if limit is not None and len(frame) > limit:
        raise WireError(f"a frame of {len(frame)} bytes is over the limit of {limit}")
    if len(frame) < 8 or frame[:4] != MAGIC:
        raise WireError("the frame does not start with VCLW")
    (size,) = struct.unpack("<I", frame[4:8])
    if 8 + size > len(frame):
        raise WireError("the header runs past the frame's end")
    if size > HEADER_MB * 2**20:
        raise WireError(f"a header of {size} bytes is over the limit of {HEADER_MB:g} MiB")
    try:
        header = json.loads(frame[8 : 8 + size])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise WireError("the header is not JSON") from None
    if not isinstance(header, dict) or header.get("v") != VERSION or not isinstance(header.get("kind"), str):
        raise WireError(f"the header is not a version-{VERSION} frame")
    specs = header.get("tensors")
    if not isinstance(specs, list):
        raise WireError("the header lists no tensors")
    arrays, offset = [], 8 + size
    for spec in specs:
        dtype = DTYPES.get(spec.get("dtype")) if isinstance(spec, dict) else None
        shape = spec.get("shape") if isinstance(spec, dict) else None
        if dtype is None or not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise WireError(f"a tensor spec {spec!r} is not a known dtype and a shape")
        count = math.prod(shape)  # exact: a product past int64 is caught by the size check below
        nbytes = count * torch.empty((), dtype=dtype).element_size()
        if offset + nbytes > len(frame):
            raise WireError("the tensors' bytes run past the frame's end")
        raw = bytearray(memoryview(frame)[offset : offset + nbytes])  # one copy, the tensor's own (writable)
        arrays.append(
            torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)
            if nbytes
            else torch.empty(shape, dtype=dtype)
        )
        offset += nbytes
    if offset != len(frame):
        raise WireError(f"{len(frame) - offset} bytes follow the last tensor")
    return header["kind"], _decode(header.get("body"), arrays)


CHUNK_MB = 4.0  # the default piece of a frame on a stream (gRPC's own default message size)


class FrameTooLarge(WireError):
    """A frame whose pieces add up to more than the receiver accepts."""


def pieces(frame: bytes, size: int):
    """A frame as the pieces a stream carries, at most ``size`` bytes each (one empty piece for an empty frame)."""
    view = memoryview(frame)
    yield bytes(view[:size])
    for start in range(size, len(frame), size):
        yield bytes(view[start : start + size])


def joined(stream, limit: int) -> bytes:
    """The frame a stream of pieces carries; :class:`FrameTooLarge` as soon as their total passes ``limit`` (the
    rest is never read)."""
    parts, total = [], 0
    for piece in stream:
        total += len(piece)
        if total > limit:
            raise FrameTooLarge(f"a frame of over {limit} bytes is over the limit of {limit}")
        parts.append(piece)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def pack_message(message: Message) -> bytes:
    fields = {f.name: getattr(message, f.name) for f in dataclasses.fields(message)}
    return pack(message.kind, fields)


def unpack_message(frame: bytes, limit: int | None = None) -> Message:
    """The message a frame holds: its kind must be a message class, its fields that class's fields."""
    kind, fields = unpack(frame, limit)
    cls = message_classes().get(kind)
    if cls is None:
        raise WireError(f"{kind!r} is no message kind")
    names = {f.name for f in dataclasses.fields(cls)}
    if not isinstance(fields, dict) or not set(fields) <= names:
        raise WireError(f"a {kind} holds fields {sorted(fields) if isinstance(fields, dict) else fields!r}")
    try:
        return cls(**fields)
    except (TypeError, ValueError) as err:
        raise WireError(f"a {kind} cannot be built from its fields ({str(err)[:200]})") from None


def party_ids(data):
    """What a party that builds itself elsewhere is sent of the row alignment: the aligned IDs, and for ``train.py
    predict`` the new people's too (``{"rows": ..., "new": ...}``), each one Arrow array of texts; for a finished run
    whose parties keep their preparation, where each party's checkpoint is (``"checkpoints"``) instead of rows."""

    ids, new, where = (getattr(data, key, None) for key in ("ids", "new_ids", "checkpoints"))  # VerticalData's
    ids, new = (None if i is None else string_array(i) for i in (ids, new))
    return ids if new is None else {"rows": ids, "new": new, **({"checkpoints": where} if where is not None else {})}
