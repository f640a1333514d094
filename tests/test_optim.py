"""vcl.optim computes what torch.optim computes, bit for bit, without importing TorchDynamo."""

import subprocess
import sys

import pytest
import torch

from vcl import optim


def _problem(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(64, 5, generator=g), torch.randn(64, 3, generator=g)
    net = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return net, x, y


def _train(make_opt, make_sched, steps: int = 30, skip: int | None = None) -> list[torch.Tensor]:
    net, x, y = _problem()
    opt = make_opt(net.parameters())
    sched = make_sched(opt) if make_sched else None
    params = list(net.parameters())
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        (net(x) - y).pow(2).mean().backward()
        if skip is not None and i % 3 == 0:
            params[skip].grad = None  # a parameter without a gradient this step is left as it is
        opt.step()
        if sched is not None:
            sched.step()
    return [p.detach().clone() for p in net.parameters()]


@pytest.mark.parametrize(
    "kw",
    [
        dict(lr=0.1),
        dict(lr=0.1, momentum=0.9),
        dict(lr=0.1, momentum=0.9, weight_decay=5e-4),
        dict(lr=0.05, weight_decay=0.1),
    ],
)
@pytest.mark.parametrize("skip", [None, 1])
def test_sgd_and_schedule_equal_torch(kw, skip):
    ours = _train(lambda p: optim.SGD(p, **kw), lambda o: optim.MultiStepLR(o, [5, 12, 12], 0.3), skip=skip)
    theirs = _train(
        lambda p: torch.optim.SGD(p, **kw),
        lambda o: torch.optim.lr_scheduler.MultiStepLR(o, [5, 12, 12], 0.3),
        skip=skip,
    )
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_schedule_milestone_at_zero_applies_at_construction():
    ours = optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    theirs = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    optim.MultiStepLR(ours, [0, 2], 0.5)
    torch.optim.lr_scheduler.MultiStepLR(theirs, [0, 2], 0.5)
    assert ours.param_groups[0]["lr"] == theirs.param_groups[0]["lr"] == 0.5


@pytest.mark.parametrize(
    "kw", [dict(lr=1e-3), dict(lr=0.1, weight_decay=5e-4), dict(lr=0.01, betas=(0.5, 0.9), eps=1e-6)]
)
def test_adam_equals_torch(kw):
    ours = _train(lambda p: optim.Adam(p, **kw), None, skip=0)
    theirs = _train(lambda p: torch.optim.Adam(p, **kw), None, skip=0)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


@pytest.mark.parametrize("start", [1.0, -3.0, 0.0])
def test_scalar_lbfgs_equals_torch_on_a_line_search(start):
    """Alice's line search: one scalar η along a direction, cross-entropy in float64, 10 steps of up to 20
    iterations: lbfgs_scalar evaluates the points torch.optim.LBFGS evaluates."""
    g = torch.Generator().manual_seed(1)
    F, direction = torch.randn(50, 4, generator=g).double(), torch.randn(50, 4, generator=g).double()
    y = torch.randint(0, 4, (50,), generator=g)

    def value(eta):
        return torch.nn.functional.cross_entropy(F + eta * direction, y)

    eta = torch.tensor([start], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([eta], lr=1.0)
    theirs = []

    def closure():
        opt.zero_grad(set_to_none=True)
        loss = value(eta)
        loss.backward()
        theirs.append(float(eta.detach()))
        return loss

    for _ in range(10):
        opt.step(closure)
    ours = []

    def fun(x):
        ours.append(x)
        e = torch.tensor([x], dtype=torch.float64, requires_grad=True)
        loss = value(e)
        loss.backward()
        return float(loss.detach()), float(e.grad)

    found = optim.lbfgs_scalar(fun, start, 10)
    assert len(ours) == len(theirs) > 10
    assert ours == pytest.approx(theirs, rel=1e-13, abs=1e-13)
    assert found == pytest.approx(float(eta.detach()), rel=1e-13)


@pytest.mark.slow
def test_training_imports_no_dynamo():
    """The point of vcl.optim: a fit with these optimizers does not import TorchDynamo (torch.optim would)."""
    code = (
        "import sys, torch\n"
        "from vcl import optim\n"
        "w = torch.zeros(3, requires_grad=True)\n"
        "for opt in (optim.SGD([w], lr=0.1, momentum=0.9), optim.Adam([w])):\n"
        "    def closure():\n"
        "        opt.zero_grad(); loss = (w - 1).pow(2).sum(); loss.backward(); return loss\n"
        "    closure(); opt.step()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("max_norm", [0.05, 1.0, 100.0])
@pytest.mark.parametrize("given_total", [False, True])
def test_clip_norm_equals_torch(max_norm, given_total):
    from vcl.loop import clip_norm

    def grads():
        net, x, y = _problem(3)
        (net(x) - y).pow(2).mean().backward()
        return list(net.parameters())

    ours, theirs = grads(), grads()
    total = torch.tensor(2.5) if given_total else None
    clip_norm(ours, max_norm, total)
    if given_total:
        torch.nn.utils.clip_grads_with_norm_(theirs, max_norm, total)
    else:
        torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(ours, theirs, strict=True))
