"""template_rows gathers observation-template rows as 8-byte words: the same bits as index_select."""

from __future__ import annotations

import pytest
import torch

from finpod.env.observation import template_rows

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on CPU CI)"),
    ),
]


def _bits(values: torch.Tensor) -> torch.Tensor:
    return values.view(torch.int32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("width", [1302, 1301, 2, 1])
def test_rows_are_index_select_bit_for_bit(device: str, width: int) -> None:
    generator = torch.Generator().manual_seed(width)
    template = torch.randn(50, width, generator=generator)
    template[3, 0], template[7, -1], template[9, 0] = float("nan"), float("-inf"), -0.0
    template = template.to(device)
    before = template.clone()
    bars = torch.tensor([3, 7, 9, 3, 0, 49, 7], device=device)
    rows = template_rows(template, bars)
    assert rows.dtype == torch.float32
    assert rows.shape == (7, width)
    assert rows.is_contiguous()
    assert torch.equal(_bits(rows), _bits(template.index_select(0, bars)))
    rows.fill_(1.0)  # a fresh tensor: writing it leaves the template alone
    assert torch.equal(_bits(template), _bits(before))


def test_a_strided_template_is_gathered_too() -> None:
    template = torch.randn(20, 8)[:, ::2]  # not contiguous: the plain float32 gather
    bars = torch.tensor([1, 19, 1])
    assert torch.equal(template_rows(template, bars), template.index_select(0, bars))
