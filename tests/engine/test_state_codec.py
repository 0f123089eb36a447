"""Agent states as one flat buffer (podracer.state_codec): exact round trips, refusals of anything else."""

from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np
import pytest
import torch

from engine._tournament_kit import TINY_PPO, make_agent, make_env
from podracer.backends.pod_host import pack_state, unpack_state
from podracer.entity import EntityLayout
from podracer.errors import SnapshotError
from podracer.ppo import PPOAgent, PPOConfig
from podracer.state_codec import ALIGN_BYTES, MAGIC, decode_state, encode_state


def _same(first: Any, second: Any) -> bool:
    """Equal trees: the same container types, tensors of one dtype, shape and values, equal leaves."""
    if isinstance(first, torch.Tensor):
        return (
            isinstance(second, torch.Tensor)
            and first.dtype == second.dtype
            and first.shape == second.shape
            and torch.equal(first.cpu(), second)
        )
    if isinstance(first, dict):
        return (
            type(second) is dict
            and list(first) == list(second)
            and all(_same(first[k], second[k]) for k in first)
        )
    if isinstance(first, list | tuple):
        return type(first) is type(second) and len(first) == len(second) and all(map(_same, first, second))
    return type(first) is type(second) and (first == second or (first != first and second != second))


def _trained_state(config: PPOConfig = TINY_PPO) -> dict[str, Any]:
    agent = make_agent(config, 3)
    agent.train_round(make_env(3))
    return agent.state_dict()


def test_a_trained_agents_state_comes_back_exactly_and_loads() -> None:
    state = _trained_state()
    again = decode_state(encode_state(state))
    assert _same(state, again)
    twin = make_agent(TINY_PPO, 3)
    twin.load_state_dict(again)
    assert _same(twin.state_dict(), state)
    assert _same(unpack_state(pack_state(state)), state)


def test_a_cross_sectional_agents_state_comes_back_exactly() -> None:
    layout = EntityLayout(num_entities=3, entity_features=2, entity_extras=1, num_globals=2, action_globals=1)
    config = PPOConfig(
        rollout_steps=4,
        num_minibatches=2,
        hidden_sizes=(8, 8),
        policy="cross_sectional",
        advantages="entity",
        pathwise_coef=1.0,
        critic_features="actor",
    )
    agent = PPOAgent(3 * 3 + 2, 4, 0.0, 1.0, config, torch.device("cpu"), 0, layout=layout)
    state = agent.state_dict()
    assert _same(decode_state(encode_state(state)), state)


def test_every_dtype_shape_and_plain_value_comes_back() -> None:
    state = {
        "floats": torch.randn(3, 5, dtype=torch.float64),
        "halves": torch.randn(7, dtype=torch.bfloat16),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros((0, 4), dtype=torch.int32),
        "flags": torch.tensor([True, False, True]),
        "bytes": torch.arange(13, dtype=torch.uint8),
        "strided": torch.arange(24, dtype=torch.int64).reshape(4, 6)[:, ::2],  # not contiguous
        "nested": {"tuple": (1, 2.0, "three", None, True), "list": [1, [2, (3,)]], "inf": float("inf")},
        "nan": float("nan"),
        "blob": b"\x00\x01",
        "tensors in a list": [torch.ones(2), torch.zeros(1, dtype=torch.int16)],
    }
    again = decode_state(encode_state(state))
    assert _same(state, again)
    assert again["strided"].is_contiguous()


def test_tensors_are_aligned_writable_and_independent() -> None:
    state = {"a": torch.arange(5, dtype=torch.float32), "b": torch.arange(3, dtype=torch.float64)}
    data = encode_state(state)
    again = decode_state(data)
    again["a"] += 1.0
    assert torch.equal(again["b"], state["b"])  # the views do not overlap
    assert torch.equal(decode_state(data)["a"], state["a"])  # the bytes are untouched
    assert again["b"].data_ptr() % ALIGN_BYTES == again["a"].data_ptr() % ALIGN_BYTES


def test_an_object_that_is_neither_tensor_nor_plain_value_is_refused_when_encoding() -> None:
    with pytest.raises(SnapshotError, match="holds a ndarray"):
        encode_state({"weights": np.zeros(3)})
    with pytest.raises(SnapshotError, match="holds a Generator"):
        encode_state({"rng": torch.Generator()})
    with pytest.raises(SnapshotError, match="complex64 tensor"):
        encode_state({"z": torch.zeros(2, dtype=torch.complex64)})


class Exploit:
    """An object an attacker would want a driver to unpickle."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("pwned",))


def _with_header(header: bytes, data: bytes = b"") -> bytes:
    return MAGIC + len(header).to_bytes(8, "little") + header + data


def test_a_pickled_object_is_refused_when_decoding(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SnapshotError, match="not an encoded state; refusing to unpickle"):
        decode_state(pickle.dumps({"evil": Exploit()}))
    with pytest.raises(SnapshotError, match=r"names \S*print; refusing to unpickle"):
        decode_state(_with_header(pickle.dumps({"evil": Exploit()})))
    assert "pwned" not in capsys.readouterr().out


def _header_with_record(record: tuple[Any, ...]) -> bytes:
    """A header whose one tensor is the persistent id ``record`` (a forged offset, size, dtype, shape)."""
    header = io.BytesIO()

    class Forged(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            return record if isinstance(obj, torch.Tensor) else None

    Forged(header).dump({"w": torch.ones(2)})
    return header.getvalue()


def test_truncated_or_malformed_buffers_are_refused() -> None:
    data = encode_state({"w": torch.ones(100)})
    with pytest.raises(SnapshotError, match="not an encoded state"):
        decode_state(data[:5])
    with pytest.raises(SnapshotError, match="truncated"):
        decode_state(MAGIC + (10**6).to_bytes(8, "little") + b"x")
    with pytest.raises(SnapshotError, match="malformed"):
        decode_state(data[: len(data) - 8])  # the last tensor runs past the end
    for forged in [(0, 8, "no such dtype", (2,)), (0, 0, "float32", (5,)), (-8, 8, "float32", (2,))]:
        with pytest.raises(SnapshotError, match="malformed"):
            decode_state(_with_header(_header_with_record(forged), bytes(64)))
    with pytest.raises(SnapshotError, match="is a list, not a dict"):
        decode_state(_with_header(pickle.dumps([1, 2])))
