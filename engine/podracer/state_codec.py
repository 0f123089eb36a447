"""Agent states as one flat buffer: the tensors' bytes back to back, and a header of plain values.

An agent state (:meth:`~podracer.ppo.PPOAgent.state_dict`) is a tree of dicts, lists and tuples
whose leaves are tensors and plain values (numbers, strings, booleans, ``None``). Pod workers send
one to the driver after every round, so its encoding is on the tournament's critical path: ``torch.save``
writes every tensor as its own pickled storage and ``torch.load(weights_only=True)`` reads it back
with a pure-Python unpickler (about 1.6 ms and 4.5 ms for the 72 tensors of a small agent), where
this codec copies the tensors' bytes into one buffer and reads them back as views of it (about
0.3 ms each way).

Layout: :data:`MAGIC`, the header's length (8 bytes, little-endian), the header, then the tensors'
bytes, each at an offset that is a multiple of :data:`ALIGN_BYTES`. The header is a pickle of the
tree in which each tensor is a *persistent id* ``(offset, nbytes, dtype name, shape)``; it is read
by an unpickler that refuses every global, so it can only ever build plain values and the tensors
this module makes: an arbitrary pickled object is refused on decode, and refused on encode too.

Tensors come back on the CPU, contiguous, with their dtypes and shapes (not their ``requires_grad``
or storage sharing, as ``torch.load`` of a ``state_dict`` would give for plain tensors).
"""

from __future__ import annotations

import io
import math
import pickle
from collections.abc import Mapping
from typing import Any, Final

import torch

from podracer.errors import SnapshotError

MAGIC: Final[bytes] = b"PODST001"
"""The first bytes of an encoded state (format name and version)."""
ALIGN_BYTES: Final[int] = 64
"""Each tensor's bytes start at a multiple of this offset into the data (a cache line)."""
_HEADER_LENGTH_BYTES: Final[int] = 8
_DTYPES: Final[dict[str, torch.dtype]] = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.bool,
    )
}
"""The tensor dtypes a state may hold, by name."""


class _StatePickler(pickle.Pickler):
    """Pickles plain values; tensors become persistent ids, anything else is refused."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.tensors: list[torch.Tensor] = []
        self.offset = 0

    def persistent_id(self, obj: Any) -> Any:
        if not isinstance(obj, torch.Tensor):
            return None
        name = str(obj.dtype).removeprefix("torch.")
        if name not in _DTYPES:
            raise SnapshotError(f"an agent state holds a {obj.dtype} tensor; it cannot travel as a state")
        tensor = obj.detach().to("cpu").contiguous()
        nbytes = tensor.numel() * tensor.element_size()
        self.offset = -(-self.offset // ALIGN_BYTES) * ALIGN_BYTES
        pid = (self.offset, nbytes, name, tuple(tensor.shape))
        self.tensors.append(tensor)
        self.offset += nbytes
        return pid

    def reducer_override(self, obj: Any) -> Any:
        # called for every object but None, booleans, int, float, bytes, str, dict, list, tuple,
        # set and frozenset (and tensors, already taken by persistent_id)
        raise SnapshotError(
            f"an agent state holds a {type(obj).__name__}; only tensors and plain values travel"
        )


class _StateUnpickler(pickle.Unpickler):
    """Builds plain values and views of ``data``; refuses every global (no class, no function)."""

    def __init__(self, file: io.BytesIO, data: bytearray) -> None:
        super().__init__(file)
        self._data = data

    def find_class(self, module: str, name: str) -> Any:
        raise SnapshotError(f"an agent state names {module}.{name}; refusing to unpickle it")

    def persistent_load(self, pid: Any) -> torch.Tensor:
        try:
            offset, nbytes, name, shape = pid
            dtype = _DTYPES[name]
            if offset < 0 or offset + nbytes > len(self._data):
                raise ValueError("out of range")
            if math.prod(shape) * _itemsize(dtype) != nbytes or min(shape, default=0) < 0:
                raise ValueError("size")
            if nbytes == 0:
                return torch.empty(tuple(shape), dtype=dtype)
            flat = torch.frombuffer(self._data, dtype=dtype, count=nbytes // _itemsize(dtype), offset=offset)
            return flat.view(tuple(shape))
        except (TypeError, ValueError, KeyError, RuntimeError):
            raise SnapshotError(f"an agent state's tensor record {pid!r} is malformed") from None


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def encode_state(state: Mapping[str, Any]) -> bytes:
    """``state`` (tensors and plain values in dicts, lists and tuples) as one buffer.

    Raises:
        SnapshotError: ``state`` holds an object that is neither (a module, a generator, a numpy
            array...), or a tensor of a dtype outside :data:`_DTYPES`.
    """
    header = io.BytesIO()
    pickler = _StatePickler(header)
    pickler.dump(dict(state))
    head = header.getvalue()
    start = len(MAGIC) + _HEADER_LENGTH_BYTES + len(head)
    pad = -start % ALIGN_BYTES  # the data starts aligned too
    out = bytearray(start + pad + pickler.offset)
    out[: len(MAGIC)] = MAGIC
    head_length = (len(head) + pad).to_bytes(_HEADER_LENGTH_BYTES, "little")
    out[len(MAGIC) : len(MAGIC) + _HEADER_LENGTH_BYTES] = head_length
    out[len(MAGIC) + _HEADER_LENGTH_BYTES : start] = head
    data_start = start + pad
    offset = 0
    for tensor in pickler.tensors:
        offset = -(-offset // ALIGN_BYTES) * ALIGN_BYTES
        nbytes = tensor.numel() * tensor.element_size()
        if nbytes:
            view = memoryview(out)[data_start + offset : data_start + offset + nbytes]
            torch.frombuffer(view, dtype=torch.uint8).copy_(tensor.view(-1).view(torch.uint8))
        offset += nbytes
    return bytes(out)


def decode_state(data: bytes) -> dict[str, Any]:
    """Read :func:`encode_state` bytes: tensors (CPU views of one copy of the data) and plain values.

    Raises:
        SnapshotError: ``data`` is not an encoded state, is truncated, or its header names any class
            or function (an arbitrary pickled object).
    """
    prefix = len(MAGIC) + _HEADER_LENGTH_BYTES
    if len(data) < prefix or data[: len(MAGIC)] != MAGIC:
        raise SnapshotError(
            "an agent state from a pod worker is not an encoded state; refusing to unpickle it"
        )
    head_length = int.from_bytes(data[len(MAGIC) : prefix], "little")
    if prefix + head_length > len(data):
        raise SnapshotError("an agent state from a pod worker is truncated")
    tensors = bytearray(memoryview(data)[prefix + head_length :])
    try:
        state = _StateUnpickler(io.BytesIO(data[prefix : prefix + head_length]), tensors).load()
    except SnapshotError:
        raise
    except Exception as exc:
        raise SnapshotError(f"an agent state's header does not read ({type(exc).__name__})") from None
    if not isinstance(state, dict):
        raise SnapshotError(f"an agent state from a pod worker is a {type(state).__name__}, not a dict")
    return state
