"""The torch.distributed backend "qccl" on real ranks: every method torch's
users reach, against an exact reference each rank computes itself (inputs
any rank can regenerate) and against gloo on the same inputs; async Works
(wait, is_completed, get_future), coalescing, new_group. Run by
tests/python/run.sh under qcclrun."""
import datetime

import numpy as np
import pytest
import torch
import torch.distributed as dist

import qccl.torch  # noqa: F401  (registers "qccl")
from util import draw_seed, values, reduce_ref

RO = dist.ReduceOp
OPS = {"sum": RO.SUM, "avg": RO.AVG, "product": RO.PRODUCT, "min": RO.MIN, "max": RO.MAX}
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.int32, torch.int64, torch.uint8, torch.int8]


@pytest.fixture(scope="module")
def env():
    dist.init_process_group("qccl", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    s = torch.tensor([draw_seed()], dtype=torch.int64)
    dist.broadcast(s, 0, group=gloo)
    if dist.get_rank() == 0:
        print("seed %d (QCCL_TEST_SEED=%d replays it)" % (s.item(), s.item()))
    yield int(s.item()), gloo
    dist.destroy_process_group()


def inputs(seed, n, dtype, op="sum", salt=0):
    """Every rank's input (float64 NumPy) and this rank's as a tensor."""
    name = str(dtype).replace("torch.", "")
    gen = "uint8" if dtype == torch.uint8 else ("float32" if dtype.is_floating_point else name)
    all_ = [values(seed, r, n, gen, op, salt) for r in range(dist.get_world_size())]
    return all_, torch.from_numpy(all_[dist.get_rank()]).to(dtype)


def ref(arr, dtype):
    return torch.from_numpy(np.asarray(arr)).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("op", list(OPS))
def test_allreduce(env, dtype, op):
    seed, gloo = env
    if op == "avg" and not dtype.is_floating_point:
        with pytest.raises(Exception, match="AVG"):
            dist.all_reduce(torch.zeros(3, dtype=dtype), op=OPS[op])
        return
    all_, x = inputs(seed, 1001, dtype, op)
    want = ref(reduce_ref(all_, op), dtype)
    dist.all_reduce(x, op=OPS[op])
    if op == "avg":
        torch.testing.assert_close(x.double(), want.double(), rtol=1e-2 if dtype in
                                   (torch.bfloat16, torch.float16) else 1e-6, atol=0)
    else:
        assert torch.equal(x, want)


def test_allreduce_vs_gloo(env):
    """Random normal f32 inputs: qccl and gloo agree to f32 rounding."""
    seed, gloo = env
    g = torch.Generator().manual_seed(seed * 7 + dist.get_rank())
    for op in ("sum", "avg", "max"):
        if op == "avg":
            continue  # gloo has no AVG; covered against the reference above
        x = torch.randn(5003, generator=g)
        y = x.clone()
        dist.all_reduce(x, op=OPS[op])
        dist.all_reduce(y, op=OPS[op], group=gloo)
        torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-6)


def test_allreduce_odd_tensors(env):
    """non-contiguous, bool, int16, complex, empty, PREMUL_SUM."""
    seed, _ = env
    W, r = dist.get_world_size(), dist.get_rank()
    m = torch.arange(24, dtype=torch.float32).view(4, 6) * (r + 1)
    col = m[:, 1]
    assert not col.is_contiguous()
    dist.all_reduce(col)
    assert torch.equal(m[:, 1], torch.arange(1, 24, 6, dtype=torch.float32) * W * (W + 1) / 2)
    assert torch.equal(m[:, 0], torch.arange(0, 24, 6, dtype=torch.float32) * (r + 1))
    b = torch.tensor([r == 0, False, True])
    dist.all_reduce(b)  # logical or, as gloo
    assert b.tolist() == [True, False, True]
    i16 = torch.full((5,), r + 1, dtype=torch.int16)
    dist.all_reduce(i16, op=RO.MAX)
    assert i16.dtype == torch.int16 and (i16 == W).all()
    c = torch.full((3,), complex(r, 1), dtype=torch.complex64)
    dist.all_reduce(c)
    assert torch.equal(c, torch.full((3,), complex(W * (W - 1) / 2, W), dtype=torch.complex64))
    e = torch.empty(0)
    dist.all_reduce(e)
    x = torch.ones(4)
    dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.5))
    assert torch.equal(x, torch.full((4,), 0.5 * W))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_broadcast_reduce_every_root(env, dtype):
    seed, _ = env
    for root in range(dist.get_world_size()):
        all_, x = inputs(seed, 513, dtype, salt=root)
        dist.broadcast(x, src=root)
        assert torch.equal(x, ref(all_[root], dtype))
        all_, x = inputs(seed, 513, dtype, salt=root + 10)
        dist.reduce(x, dst=root, op=RO.SUM)
        if dist.get_rank() == root:
            assert torch.equal(x, ref(reduce_ref(all_, "sum"), dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.bool])
def test_allgather_forms(env, dtype):
    seed, gloo = env
    W = dist.get_world_size()
    gen = torch.float32 if dtype == torch.bool else dtype
    all_, x = inputs(seed, 100, gen)
    if dtype == torch.bool:
        all_ = [a > 0 for a in all_]
        x = x > 0
    outs = [torch.empty(10, 10, dtype=dtype) for _ in range(W)]
    dist.all_gather(outs, x.view(10, 10))
    for i in range(W):
        assert torch.equal(outs[i].reshape(-1), ref(all_[i], dtype))
    o = torch.empty(W * 100, dtype=dtype)
    dist.all_gather_into_tensor(o, x)
    assert torch.equal(o, ref(np.concatenate(all_), dtype))
    if dtype == torch.float32:
        og = torch.empty(W * 100, dtype=dtype)
        dist.all_gather_into_tensor(og, x, group=gloo)
        assert torch.equal(o, og)


@pytest.mark.parametrize("op", ["sum", "avg", "max"])
def test_reduce_scatter_forms(env, op):
    seed, gloo = env
    W, r = dist.get_world_size(), dist.get_rank()
    n = 64
    all_, x = inputs(seed, n * W, torch.float32, op)
    want = ref(reduce_ref(all_, op), torch.float32)[r * n:(r + 1) * n]
    o = torch.empty(n)
    dist.reduce_scatter_tensor(o, x, op=OPS[op])
    torch.testing.assert_close(o, want, rtol=1e-6, atol=0)
    o2 = torch.empty(n)
    dist.reduce_scatter(o2, list(x.split(n)), op=OPS[op])
    assert torch.equal(o, o2)
    if op != "avg":
        og = torch.empty(n)
        dist.reduce_scatter_tensor(og, x, op=OPS[op], group=gloo)
        assert torch.equal(o, og)


def test_alltoall_forms(env):
    seed, gloo = env
    W, r = dist.get_world_size(), dist.get_rank()
    # equal splits
    x = torch.arange(W * 6, dtype=torch.float32) + 1000 * r
    o = torch.empty_like(x)
    dist.all_to_all_single(o, x)
    og = torch.empty_like(x)
    dist.all_to_all_single(og, x, group=gloo)
    assert torch.equal(o, og)
    # split sizes: rank r sends (r + j + 1) rows of 3 to rank j
    send = [r + j + 1 for j in range(W)]
    recv = [j + r + 1 for j in range(W)]
    x = torch.cat([torch.full((send[j], 3), float(100 * r + j)) for j in range(W)])
    o = torch.empty(sum(recv), 3)
    dist.all_to_all_single(o, x, recv, send)
    want = torch.cat([torch.full((recv[j], 3), float(100 * j + r)) for j in range(W)])
    assert torch.equal(o, want)
    og = torch.empty(sum(recv), 3)
    dist.all_to_all_single(og, x, recv, send, group=gloo)
    assert torch.equal(o, og)
    # list form, tensors of different sizes per peer
    ins = [torch.full((r + j + 1,), r * 10 + j, dtype=torch.int64) for j in range(W)]
    outs = [torch.empty(j + r + 1, dtype=torch.int64) for j in range(W)]
    dist.all_to_all(outs, ins)
    for j in range(W):
        assert (outs[j] == j * 10 + r).all()


def test_gather_scatter(env):
    seed, _ = env
    W, r = dist.get_world_size(), dist.get_rank()
    for root in range(W):
        x = torch.full((7,), float(r * 3 + root))
        gl = [torch.empty(7) for _ in range(W)] if r == root else None
        dist.gather(x, gl, dst=root)
        if r == root:
            for i in range(W):
                assert (gl[i] == i * 3 + root).all()
        o = torch.empty(2, 3, dtype=torch.int32)
        sl = [torch.full((2, 3), i + root, dtype=torch.int32) for i in range(W)] if r == root \
            else None
        dist.scatter(o, sl, src=root)
        assert (o == r + root).all()


def test_send_recv_and_barrier(env):
    W, r = dist.get_world_size(), dist.get_rank()
    if r == 0:
        for peer in range(1, W):
            dist.send(torch.full((1000,), float(peer)), peer)
    else:
        t = torch.empty(1000)
        dist.recv(t, 0)
        assert (t == r).all()
    # a ring through batch_isend_irecv (a coalescing window: one qccl group)
    s = torch.full((4096,), float(r))
    t = torch.empty(4096)
    ops = [dist.P2POp(dist.isend, s, (r + 1) % W), dist.P2POp(dist.irecv, t, (r - 1) % W)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert (t == (r - 1) % W).all()
    dist.barrier()


def test_coalesced(env):
    W, r = dist.get_world_size(), dist.get_rank()
    a = [torch.full((5,), float(r + k)) for k in range(3)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in a:
            dist.all_reduce(t)
    cm.wait()
    for k, t in enumerate(a):
        assert (t == sum(q + k for q in range(W))).all()
    outs = [torch.empty(W * 4) for _ in range(2)]
    ins = [torch.full((4,), float(r * 10 + k)) for k in range(2)]
    with dist._coalescing_manager():
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    for k in range(2):
        assert torch.equal(outs[k], torch.cat([torch.full((4,), float(q * 10 + k))
                                               for q in range(W)]))
    rs = [torch.empty(2) for _ in range(2)]
    with dist._coalescing_manager():
        for k, o in enumerate(rs):
            dist.reduce_scatter_tensor(o, torch.full((2 * W,), float(k + 1)))
    for k in range(2):
        assert (rs[k] == W * (k + 1)).all()
    lists = [[torch.empty(3) for _ in range(W)]]
    dist.all_gather_coalesced(lists, [torch.full((3,), float(r))])
    for q in range(W):
        assert (lists[0][q] == q).all()


def test_async_works(env):
    W, r = dist.get_world_size(), dist.get_rank()
    x = torch.full((200000,), float(r + 1))
    w = dist.all_reduce(x, async_op=True)
    fut = w.get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    assert w.wait() is True
    assert w.is_completed()
    assert (x == W * (W + 1) / 2).all()
    assert (doubled.wait() == W * (W + 1)).all()
    outs = [torch.empty(3) for _ in range(W)]
    w = dist.all_gather(outs, torch.full((3,), float(r)), async_op=True)
    w.wait()
    assert all((outs[q] == q).all() for q in range(W))


def test_new_group(env):
    W, r = dist.get_world_size(), dist.get_rank()
    members = list(range(0, W, 2))
    g = dist.new_group(members, timeout=datetime.timedelta(seconds=30))
    if r in members:
        x = torch.tensor([float(r)])
        dist.all_reduce(x, group=g)
        assert x.item() == sum(members)
        assert dist.get_backend(g) == "qccl"
        c = qccl.torch.get_comm(g)
        assert c.size == len(members)
    dist.barrier()
    c = qccl.torch.get_comm()
    assert (c.rank, c.size) == (r, W)
    assert c.stats()["all_reduce"]["calls"] > 0


def test_streams_and_blocking_path(env, monkeypatch):
    """With host streams in the library the default group queues on one; a
    group made with QCCL_TORCH_STREAM=0 runs blocking; both give the same."""
    W, r = dist.get_world_size(), dist.get_rank()
    assert qccl.torch.is_async() == qccl.stream.available()
    monkeypatch.setenv("QCCL_TORCH_STREAM", "0")
    g = dist.new_group(list(range(W)))
    monkeypatch.delenv("QCCL_TORCH_STREAM")
    assert not qccl.torch.is_async(g)
    for group in (None, g):
        x = torch.full((100003,), float(r + 1))
        ws = [dist.all_reduce(x, async_op=True, group=group) for _ in range(3)]
        outs = [torch.empty(7) for _ in range(W)]
        ws.append(dist.all_gather(outs, torch.full((7,), float(r)), async_op=True, group=group))
        for w in ws:
            w.wait()
        assert (x == (W * (W + 1) / 2) * W ** 2).all()
        assert all((outs[q] == q).all() for q in range(W))
    monkeypatch.setenv("QCCL_TORCH_STREAM", "yes")
    with pytest.raises(ValueError, match="QCCL_TORCH_STREAM"):
        dist.new_group(list(range(W)))
