"""The one training loop (vcl/engine/loop.py): schedules, steps, clipping of a network split between parties."""

import math

import pytest
import torch
from torch import nn

from vcl.engine import progress
from vcl.engine.linear import LinearSteps
from vcl.engine.loop import Steps, build_optimizer, minibatches, own_rows, permutations, train_epochs


def test_minibatches_cover_every_row_once_and_drop_a_last_piece_too_small():
    gen = torch.Generator().manual_seed(0)
    pieces = minibatches(10, 4, gen)
    assert [len(p) for p in pieces] == [4, 4, 2]
    assert sorted(torch.cat(pieces).tolist()) == list(range(10))
    assert [len(p) for p in minibatches(9, 4, gen, min_rows=2)] == [4, 4]  # the single last row is left out
    again = minibatches(10, 4, torch.Generator().manual_seed(0))  # the same generator: the same schedule
    assert all(torch.equal(a, b) for a, b in zip(pieces, again, strict=True))


def test_the_blocks_order_visits_every_row_once_an_epoch_each_model_in_its_own_permutation():
    from vcl.engine.concurrent import BlockOrder

    n, batch = 100, 16
    order = BlockOrder(n, batch, [torch.Generator().manual_seed(s) for s in (3, 4)])
    for m, seed in enumerate((3, 4)):  # each model's rows: its generator's first permutation (the rows' first epoch)
        assert torch.equal(order.rows[m].long(), torch.randperm(n, generator=torch.Generator().manual_seed(seed)))
    epochs = [order.epoch() for _ in range(3)]
    for pieces in epochs:
        covered = torch.cat([torch.arange(n)[p] for p in pieces])
        assert sorted(covered.tolist()) == list(range(n)) and all(p.stop - p.start <= batch for p in pieces)
    assert len({tuple(p.start for p in pieces) for pieces in epochs}) > 1  # a fresh order each epoch
    again = BlockOrder(n, batch, [torch.Generator().manual_seed(9)])  # the blocks' order: n and the batch's alone
    assert [p.start for p in again.epoch()] == [p.start for p in epochs[0]]
    short = BlockOrder(97, batch, [torch.Generator()], min_rows=2)  # a last batch of one row is left out
    assert sum(p.stop - p.start for p in short.epoch()) == 96


@pytest.mark.parametrize("weighted", [False, True])
def test_the_blocks_sums_are_the_gathered_rows_sums_computed_a_chunk_at_a_time(monkeypatch, weighted):
    """ℓ₂ linear steps in the blocks' order take every batch's G and C from the rows gathered a chunk of batches at a
    time (never the whole permuted rows): equal to the bit to those of the rows gathered whole, a short last batch
    included, and so are the fits' steps."""
    import vcl.engine.linear as linear
    from vcl.engine.concurrent import BlockOrder

    m, n, d, k, batch = 3, 100, 4, 2, 8
    g = torch.Generator().manual_seed(0)
    x, y, w = torch.randn(m, n, d, generator=g), torch.randn(n, k, generator=g), torch.rand(n, generator=g)
    w = w if weighted else None
    order = BlockOrder(n, batch, [torch.Generator().manual_seed(s) for s in range(m)])  # 12 batches of 8, one of 4
    gathered = []
    monkeypatch.setattr(linear, "BLOCK_CHUNK_ROWS", 3 * batch)
    monkeypatch.setattr(linear, "own_rows", lambda t, idx: gathered.append(idx.shape[-1]) or own_rows(t, idx))

    def steps(p):
        return Steps(torch.optim.SGD(p, lr=0.1, momentum=0.9), clip=1.0)

    theta = torch.zeros(m, d + 1, k)
    blocks = LinearSteps(theta, steps, x, y, "l2", w, blocks=order)
    assert max(gathered) == 3 * batch and sum(gathered) == n
    xs, ys, ws = order.gather(x, y.expand(m, n, k), None if w is None else w.expand(m, n))
    whole = LinearSteps(theta, steps, xs, ys, "l2", ws)
    for piece in order.batches:
        assert all(
            torch.equal(a, b) for a, b in zip(blocks.fixed[piece.start, piece.stop], whole._gram(piece), strict=True)
        )
    for _ in range(2):
        for piece in order.epoch():
            blocks.step(piece)
            whole.step(piece)
    assert torch.equal(blocks.theta, whole.theta) and not torch.equal(blocks.theta, theta)


def test_minibatches_of_several_generators_are_each_ones_own():
    """Models trained together: piece i holds every model's piece i, as each would draw it alone."""
    together = minibatches(9, 4, [torch.Generator().manual_seed(s) for s in (3, 4, 5)], min_rows=2)
    alone = [minibatches(9, 4, torch.Generator().manual_seed(s), min_rows=2) for s in (3, 4, 5)]
    assert [tuple(p.shape) for p in together] == [(3, 4), (3, 4)]
    for i, piece in enumerate(together):
        assert all(torch.equal(piece[m], alone[m][i]) for m in range(3))


@pytest.mark.parametrize("dtype", [torch.long, torch.int32])
def test_every_epochs_permutations_at_once_are_what_each_generator_draws_alone(dtype):
    """A concurrent fit draws all its epochs' permutations first (one block): epoch e of generator m is its e-th
    draw alone (int32: the same numbers), and the epoch's stack cut into pieces is what minibatches gives epoch by
    epoch."""
    seeds = [3, 4, 5, 6]
    orders = permutations(11, [torch.Generator().manual_seed(s) for s in seeds], epochs=3, dtype=dtype)
    assert orders[0].dtype == dtype
    for m, seed in enumerate(seeds):
        alone = torch.Generator().manual_seed(seed)
        assert all(torch.equal(orders[e][m].long(), torch.randperm(11, generator=alone)) for e in range(3))
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    for e in range(3):
        by_epoch = minibatches(11, 4, gens)
        drawn = minibatches(11, 4, orders[e])  # the epoch's permutations given instead of generators
        assert all(torch.equal(a, b) for a, b in zip(by_epoch, drawn, strict=True))


@pytest.mark.parametrize(
    "shape, dtype, offset",
    [
        ((4, 9, 3), torch.float32, 0),
        ((4, 9, 2, 3, 3), torch.float32, 0),
        ((4, 9, 2), torch.float32, 0),  # rows of one 8-byte word: selected as words
        ((4, 9, 1), torch.float32, 0),
        ((4, 9, 4), torch.bfloat16, 0),
        ((4, 9, 1), torch.float64, 0),
        ((4, 9, 2), torch.float32, 1),  # a word's rows not aligned in memory: selected as rows
        ((4, 9, 4), torch.float32, 0),  # rows of 16 bytes: selected as complex128 words
        ((4, 9, 4), torch.float32, 2),  # not aligned to 16 bytes: as rows
        ((4, 9), torch.float32, 0),
    ],
)
def test_own_rows_are_each_models_rows_of_the_stack(shape, dtype, offset):
    """own_rows(t, idx) = t[arange(M)[:, None], idx] for a stack, an expanded one (the same targets for every
    model) and, for a slice, t[:, idx]; the same values whether rows are selected as rows or as machine words."""
    t = torch.randn(offset + math.prod(shape)).to(dtype)[offset:].view(shape)
    idx = torch.stack([torch.randperm(9)[:5] for _ in range(4)])
    rows = torch.arange(4).unsqueeze(1)
    assert torch.equal(own_rows(t, idx), t[rows, idx])
    assert torch.equal(own_rows(t, idx.int()), t[rows, idx])  # int32 row numbers (a concurrent fit's draws)
    same = t[0].expand(4, *t.shape[1:])
    assert torch.equal(own_rows(same, idx), same[rows, idx])
    assert torch.equal(own_rows(t, slice(2, 6)), t[:, 2:6])
    leaf = t.float().requires_grad_()  # rows that need a gradient are selected as rows (a word view has none)
    own_rows(leaf, idx).sum().backward()
    expected = torch.zeros(shape)
    expected[rows, idx] = 1.0
    assert torch.equal(leaf.grad, expected)


def test_rows_selected_as_words_keep_every_bit():
    """Rows of 4, 8 and 16 bytes selected as words copy their bytes as they are: NaNs of any payload,
    infinities and negative zeros included (a 16-byte row goes as a complex128)."""
    bits = torch.randint(-(2**31), 2**31 - 1, (4, 9, 4), dtype=torch.int32)
    bits[0, :, 0] = torch.tensor([0x7F800001, 0x7FC00000, -1, 0x7F800000, -(2**31), 1, 0x00000001, 0, 5])
    idx = torch.stack([torch.randperm(9)[:5] for _ in range(4)])
    rows = torch.arange(4).unsqueeze(1)
    for width in (1, 2, 4):
        t = bits[..., :width].contiguous()
        assert torch.equal(own_rows(t.view(torch.float32), idx).view(torch.int32), t[rows, idx])


def test_minibatches_in_order_draw_nothing():
    gen = torch.Generator().manual_seed(0)
    state = gen.get_state()
    assert minibatches(5, 8, gen, shuffle=False) == [slice(0, 5)]
    assert torch.equal(gen.get_state(), state)


def _net(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))


def test_steps_clip_and_step_as_torch_does():
    x, y = torch.randn(20, 5), torch.randn(20, 3)
    ours, ref = _net(0), _net(0)
    steps = Steps(torch.optim.SGD(ours.parameters(), lr=0.5, momentum=0.9), clip=0.1)
    opt = torch.optim.SGD(ref.parameters(), lr=0.5, momentum=0.9)
    for _ in range(3):
        steps.step(nn.functional.mse_loss(ours(x), y))
        opt.zero_grad()
        nn.functional.mse_loss(ref(x), y).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.1)
        opt.step()
    for a, b in zip(ours.parameters(), ref.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_network_split_in_two_clipped_by_the_joint_norm_steps_as_one():
    """Interm's clipping: each part reports its gradient norms, every part clips by the whole network's norm."""
    x, y = torch.randn(20, 5), torch.randn(20, 3)
    whole, split = _net(1), _net(1)
    one = Steps(torch.optim.SGD(whole.parameters(), lr=1.0), clip=0.05)
    one.step(nn.functional.mse_loss(whole(x), y))
    bottom = Steps(torch.optim.SGD(split[0].parameters(), lr=1.0), clip=0.05)
    top = Steps(torch.optim.SGD(split[2].parameters(), lr=1.0), clip=0.05)
    hidden = split[0](x)
    leaf = hidden.detach().requires_grad_(True)  # what crosses: the representation, then its error
    top.backward(nn.functional.mse_loss(split[2](torch.tanh(leaf)), y))
    bottom.backward(hidden, leaf.grad)
    total = torch.linalg.vector_norm(torch.cat([bottom.grad_norms(), top.grad_norms()]))
    assert total > 0.05  # clipping acts
    bottom.update(total)
    top.update(total)
    for a, b in zip(whole.parameters(), split.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_train_steps_once_per_batch_and_schedule_and_bar_once_per_epoch(monkeypatch):
    net = _net(2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    x, y = torch.randn(10, 5), torch.randn(10, 3)
    gen, seen, advanced = torch.Generator().manual_seed(0), [], []
    monkeypatch.setattr(progress, "_advance", advanced.append)

    def loss(epoch, rows):
        seen.append((epoch, len(rows)))
        return nn.functional.mse_loss(net(x[rows]), y[rows])

    train_epochs(Steps(opt, sched), 3, lambda epoch: minibatches(10, 4, gen), loss, models=2)
    assert seen == [(e, n) for e in range(3) for n in (4, 4, 2)]
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 / 8)
    assert advanced == [2, 2, 2]


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="run.precision='fp8'"):
        Steps(torch.optim.SGD(_net(0).parameters(), lr=0.1), precision="fp8")


@pytest.mark.parametrize("stacked", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_an_epochs_largest_batch_takes_the_whole_datas_sums_less_the_others(stacked, weighted):
    """ℓ₂ steps of linear models: when one shuffled batch holds most rows, its G = x̃ᵀDx̃ and C = x̃ᵀDy are the whole
    data's less the other batch's; both equal the batches' own, computed from their rows with a column of ones."""
    g = torch.Generator().manual_seed(0)
    m, n, d, k = 3, 50, 4, 2
    x = torch.randn((m, n, d) if stacked else (n, d), generator=g, dtype=torch.float64)
    y, w = torch.randn(n, k, generator=g, dtype=torch.float64), torch.rand(n, generator=g, dtype=torch.float64)
    w = w if weighted else None
    theta = torch.zeros((m, d + 1, k) if stacked else (d + 1, k), dtype=torch.float64)
    linear = LinearSteps(theta, lambda p: Steps(torch.optim.SGD(p, lr=0.1)), x, y, "l2", w)
    gens = [torch.Generator().manual_seed(i) for i in range(m)] if stacked else torch.Generator().manual_seed(0)
    pieces = minibatches(n, 36, gens)  # 36 rows and 14
    assert linear.epoch(pieces) is pieces and len(linear.planned) == 2
    rows = torch.arange(m).unsqueeze(1) if stacked else None
    for piece in pieces:
        xb = x[rows, piece] if stacked else x[piece]
        xb = torch.cat([xb, torch.ones(*xb.shape[:-1], 1, dtype=x.dtype)], -1)  # x̃ = [x, 1], never made by the steps
        wb = torch.ones(piece.shape, dtype=x.dtype) if w is None else w[piece]
        xw = (xb * (wb / wb.sum(-1, keepdim=True)).unsqueeze(-1)).transpose(-1, -2)
        gram, c = linear.planned[id(piece)]
        torch.testing.assert_close(gram, xw @ xb)
        torch.testing.assert_close(c, xw @ y[piece])
    linear.epoch(minibatches(n, 20, gens))
    assert not linear.planned  # no batch holds over half the rows: each step computes its own


def test_a_derived_seed_is_numpys_seed_sequence_first_word():
    """vcl.engine.loop.derived_seed (every round's and organization's seed) computes what
    ``numpy.random.SeedSequence(parts).generate_state(1)[0]`` gives, masked to 31 bits: for short and long seeds, zeros,
    and integers of one, two and three 32-bit words."""
    import random

    import numpy as np

    from vcl.engine.loop import derived_seed

    rng = random.Random(0)
    values = [0, 1, 7, 2**31 - 1, 2**32 - 1, 2**32, 2**64, 2**70 + 5]
    for _ in range(3000):
        parts = [rng.choice([*values, rng.randrange(2**32), rng.randrange(2**80)]) for _ in range(rng.randint(1, 11))]
        expected = int(np.random.SeedSequence(parts).generate_state(1)[0]) & 0x7FFFFFFF
        assert derived_seed(*parts) == expected, parts
    with pytest.raises(ValueError, match="non-negative"):
        derived_seed(3, -1)


@pytest.mark.parametrize("shape", [(9, 4), (8, 9, 4)])
def test_the_fast_engines_sgd_steps_equal_torchs_plain_sgd_to_the_bit(shape):
    """build_optimizer's SGD takes torch's fused kernel on the CPU: the same parameters as torch.optim.SGD's own
    loop over them, step for step, through the step schedule's milestones."""
    gen = torch.Generator().manual_seed(0)
    start = torch.randn(*shape, generator=gen)
    grads = [torch.randn(*shape, generator=gen) for _ in range(12)]
    ends = []
    for make in (
        lambda p: build_optimizer([p], 0.1, 0.9, 5e-4, [3, 7], 0.1),
        lambda p: (o := torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=5e-4),
                   torch.optim.lr_scheduler.MultiStepLR(o, [3, 7], 0.1)),
    ):  # fmt: skip
        p = start.clone().requires_grad_(True)
        opt, sched = make(p)
        for epoch, g in enumerate(grads):
            p.grad = g.clone()
            opt.step()
            if epoch % 2:
                sched.step()
        ends.append(p.detach())
    assert opt.defaults.get("fused") in (None, False)  # the reference is torch's loop, not its kernel
    assert torch.equal(*ends)


def test_fp16s_scaler_skips_the_steps_it_finds_overflowing_with_the_fast_engines_sgd():
    """Under ``16-mixed`` the gradient scaler skips a step whose scaled gradients overflowed and lowers its scale;
    the step then moves nothing. A fused SGD behind the scaler (what build_optimizer gave at every precision before
    an H200 run of tests/test_gpu.py caught its CNNs not learning) moved its weights on those steps and diverged.
    Here on the CPU: a start scale that overflows the first steps, the fast engine's Steps with clipping."""
    from vcl.engine.loop import Steps

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 10, generator=gen)
    y = (x[:, 0] > 0).long()
    losses = {}
    for precision in ("16-mixed", "32-true"):
        net = torch.nn.Linear(10, 2)
        with torch.no_grad():
            net.weight.copy_(torch.randn(2, 10, generator=gen) * 0.1)
            net.bias.zero_()
        opt, sched = build_optimizer(net.parameters(), 0.1, 0.9, 5e-4, [], 0.1, precision=precision)
        steps = Steps(opt, sched, clip=1.0, precision=precision, device="cpu")
        if steps.scaler is not None:
            steps.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127)  # the first steps' gradients overflow
        for _ in range(60):
            steps.step(torch.nn.functional.cross_entropy(net(x), y) * 100)
        losses[precision] = float(torch.nn.functional.cross_entropy(net(x), y))
        if steps.scaler is not None:
            assert steps.scaler.get_scale() < 2.0**127  # it did skip steps
    assert losses["16-mixed"] < 0.1 and abs(losses["16-mixed"] - losses["32-true"]) < 0.05, losses
