"""Pseudo-residuals against autograd; the assistance weights and the line search."""

import numpy as np
import pytest
import torch

from vcl.engine.tasks import Task
from vcl.methods.gal.assistance import assistance_weights, line_search


@pytest.mark.parametrize(
    "task",
    [Task("classification", 4, "ce"), Task("regression", 1, "l1"), Task("regression", 2, "mse")],
)
def test_pseudo_residual_is_minus_gradient_of_summed_loss(task):
    g = torch.Generator().manual_seed(0)
    n = 16
    F = torch.randn(n, task.num_outputs, generator=g, requires_grad=True)
    if task.kind == "classification":
        y = torch.randint(0, task.num_outputs, (n,), generator=g)
    else:
        y = torch.randn(n, task.num_outputs, generator=g)
    (task.loss_value(F, y) * n * (1 if task.kind == "classification" else task.num_outputs)).backward()
    torch.testing.assert_close(task.pseudo_residual(F.detach(), y), -F.grad)


def test_initial_prediction_is_log_frequency_or_mean():
    y = torch.tensor([0, 0, 0, 1])
    F0 = Task("classification", 3, "ce").initial(y)
    assert torch.allclose(torch.softmax(F0, 0)[:2] / torch.softmax(F0, 0)[:2].sum(), torch.tensor([0.75, 0.25]))
    assert Task("regression", 1, "l1").initial(torch.tensor([[1.0], [3.0]])).item() == 2.0


def test_line_search_finds_quadratic_optimum():
    g = torch.Generator().manual_seed(1)
    task = Task("regression", 1, "mse")
    F, d, y = (torch.randn(50, 1, generator=g) for _ in range(3))
    eta = line_search(task, F, d, y)
    closed_form = float(((y - F) * d).sum() / (d * d).sum())
    assert eta == pytest.approx(closed_form, rel=1e-4)


@pytest.mark.parametrize("init", [0.0, 1.0])
def test_line_search_reaches_the_minimum_of_a_flat_line_from_either_start(init):
    """A weak fit of the residual on a well-fitted F (slope ~1e-3 along the line, its minimum near η = 98, as in
    the rounds of GAL Figure 4 where η fell to 1.2 and rose to 40 in the next): L-BFGS without a line search
    stalled within 0.2 of its start; with its strong-Wolfe search it reaches the minimum a dense grid finds."""
    task, g = Task("classification", 10, "ce"), torch.Generator().manual_seed(0)
    y = torch.randint(0, 10, (2000,), generator=g)
    F = torch.randn(2000, 10, generator=g)
    F[torch.arange(2000), y] += 4.0
    residual = torch.nn.functional.one_hot(y, 10) - torch.softmax(F, 1)
    d = 0.01 * (residual + 0.5 * torch.randn(2000, 10, generator=g))
    along = task.along(F, d, y)
    grid = np.linspace(0, 400, 4001)
    best = grid[int(np.argmin([along(e)[0] for e in grid]))]
    eta = line_search(task, F, d, y, init=init)
    assert 50 < best < 350 and eta == pytest.approx(best, abs=0.2)
    assert along(eta)[0] <= min(along(e)[0] for e in grid) + 1e-9


@pytest.mark.parametrize("task", [Task("classification", 3, "ce"), Task("regression", 1, "l1")])
def test_line_search_never_increases_loss(task):
    for seed in range(10):
        g = torch.Generator().manual_seed(seed)
        F = torch.randn(30, task.num_outputs, generator=g)
        d = torch.randn(30, task.num_outputs, generator=g) * (seed + 1)  # often a bad direction
        y = torch.randint(0, 3, (30,), generator=g) if task.kind == "classification" else torch.randn(30, 1)
        eta = line_search(task, F, d, y)
        assert task.loss_value(F + eta * d, y) <= task.loss_value(F, y) + 1e-7


def test_assistance_weights_on_simplex_and_favour_the_informative_organization():
    g = torch.Generator().manual_seed(0)
    residual = torch.randn(200, 3, generator=g)
    informative = residual + 0.1 * torch.randn(200, 3, generator=g)
    noise = torch.randn(200, 3, generator=g)
    w = assistance_weights(torch.stack([noise, informative, noise * 2]), residual, "l2")
    assert w.min() >= 0 and w.sum().item() == pytest.approx(1.0, abs=1e-6)
    assert w[1] > 0.8 and w[1] > 4 * max(w[0], w[2])


def test_l2_weights_on_the_gram_matrix_equal_adam_on_the_outputs():
    """The ℓ₂ assistance weights, from the M × M Gram matrix in NumPy, equal torch's Adam on the (M, N, K) outputs
    through autograd in float64 (and the float32 route to float32's precision)."""
    g = torch.Generator().manual_seed(3)
    outputs, residual = torch.randn(5, 80, 3, generator=g), torch.randn(80, 3, generator=g)

    def adam(dtype):
        theta = torch.ones(5, dtype=dtype, requires_grad=True)
        opt = torch.optim.Adam([theta], lr=0.1, weight_decay=5e-4)
        for _ in range(100):
            opt.zero_grad()
            combined = torch.einsum("m,mnk->nk", torch.softmax(theta, 0), outputs.to(dtype))
            (combined - residual.to(dtype)).pow(2).mean().backward()
            opt.step()
        return torch.softmax(theta.detach(), 0)

    w = assistance_weights(outputs, residual, "l2")
    assert w.dtype == torch.float32
    torch.testing.assert_close(w.double(), adam(torch.float64), rtol=1e-6, atol=1e-7)  # float32's rounding of it
    torch.testing.assert_close(w, adam(torch.float32), rtol=1e-5, atol=1e-6)
    assert not torch.equal(w, torch.full((5,), 0.2))  # it moved


@pytest.mark.parametrize(
    "kind,k,loss", [("classification", 4, "ce"), ("regression", 1, "l1"), ("regression", 2, "mse")]
)
@pytest.mark.parametrize("block", [1 << 16, 7])
def test_loss_along_a_line_equals_autograd(kind, k, loss, block, monkeypatch):
    """The line search's L₁(y, F + η d) and dL₁/dη (NumPy, float64): what autograd gives in float64; the
    cross-entropy's sums over blocks of rows (60 rows in blocks of 7: the last one short) equal one sum."""
    monkeypatch.setattr("vcl.engine.tasks.CHUNK_ROWS", block)
    task = Task(kind, k, loss)
    g = torch.Generator().manual_seed(5)
    F, d = torch.randn(60, k, generator=g) * 2, torch.randn(60, k, generator=g)
    y = torch.randint(0, k, (60,), generator=g) if kind == "classification" else torch.randn(60, k, generator=g)
    along = task.along(F, d, y)
    for value in (-3.0, 0.0, 0.7, 14.0):
        eta = torch.tensor([value], dtype=torch.float64, requires_grad=True)
        expected = task.loss_value(F.double() + eta * d.double(), y if kind == "classification" else y.double())
        expected.backward()
        loss, slope = along(value)
        assert loss == pytest.approx(float(expected.detach()), rel=1e-12)
        assert slope == pytest.approx(float(eta.grad), rel=1e-10, abs=1e-12)


def test_cross_entropy_along_a_line_with_tensors_equals_numpy(monkeypatch):
    """The accelerator's way (torch tensors, blocks copied with ``copy_``), run here on CPU tensors: NumPy's numbers."""
    monkeypatch.setattr("vcl.engine.tasks.CHUNK_ROWS", 9)
    monkeypatch.setattr("vcl.engine.tasks.DEVICE_CHUNK_ROWS", 7)
    g = torch.Generator().manual_seed(6)
    F, d, y = torch.randn(40, 3, generator=g), torch.randn(40, 3, generator=g), torch.randint(0, 3, (40,), generator=g)
    tensors, arrays = (Task._cross_entropy_along(F, d, y, xp) for xp in (torch, np))
    for eta in (-2.0, 0.0, 0.5, 9.0):
        assert tensors(eta) == pytest.approx(arrays(eta), rel=1e-12)
