"""scripts/policy/model.py's own kernels against their plain torch definitions: select_keys (the
engine's top-k: ties to the lower index) against a stable descending sort on scores full of ties,
and bmm (a grouped 1x1 convolution, for speed) against torch.bmm, forward and backward."""

import math
import os
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/setup.sh installs it)")
torch.set_num_threads(1)

SOURCE_DIR = pathlib.Path(os.environ.get("ENVFORGE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SOURCE_DIR / "scripts"))

from policy import model  # noqa: E402


def sorted_selection(scores, allowed_bias, topk):
    scores = scores + allowed_bias + 0.0
    k = min(topk, scores.shape[-1])
    top = torch.sort(scores, dim=-1, descending=True, stable=True).indices[..., :k]
    return torch.full(scores.shape, -math.inf).scatter_(-1, top, 0.0) + allowed_bias


def test_select_keys_equals_the_stable_sort_on_ties_and_short_rows():
    generator = torch.Generator().manual_seed(7)
    for trial in range(120):
        queries, keys = 5, int(torch.randint(1, 260, (1,), generator=generator))
        if trial % 2:
            scores = torch.randint(-4, 4, (3, queries, keys), generator=generator).float()  # many ties
        else:
            scores = torch.randn(3, queries, keys, generator=generator)
        scores[..., ::5] = -0.0  # the engine orders -0 as +0
        allowed = torch.zeros(queries, keys)
        for q in range(queries):  # causal-like rows: from some key on, nothing is allowed
            allowed[q, int(torch.randint(0, keys + 1, (1,), generator=generator)):] = -math.inf
        topk = int(torch.randint(1, 140, (1,), generator=generator))
        assert torch.equal(model.select_keys(scores, allowed, topk), sorted_selection(scores, allowed, topk)), trial


@pytest.mark.parametrize("shape", [(6, 40, 16, 50), (3, 64, 33, 7), (2, 8, 5, 9)])
def test_bmm_equals_torch_bmm_forward_and_backward(shape):
    groups, m, k, n = shape
    generator = torch.Generator().manual_seed(3)
    a = torch.randn(groups, m, k, generator=generator, requires_grad=True)
    b = torch.randn(groups, k, n, generator=generator, requires_grad=True)
    weight = torch.randn(groups, m, n, generator=generator)
    ours = model.bmm(a, b)
    (ours * weight).sum().backward()
    grads = (a.grad.clone(), b.grad.clone())
    a.grad = b.grad = None
    reference = torch.bmm(a, b)
    (reference * weight).sum().backward()
    assert ours.shape == reference.shape
    assert torch.allclose(ours, reference, atol=1e-4, rtol=1e-4)
    assert torch.allclose(grads[0], a.grad, atol=1e-4, rtol=1e-4)
    assert torch.allclose(grads[1], b.grad, atol=1e-4, rtol=1e-4)
