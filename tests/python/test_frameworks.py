"""DDP, FSDP2 (fully_shard) and FSDP1 on the "qccl" backend against the
same training on gloo: same model, seed and data; the losses and global
gradient norms of every step must agree to f32 rounding (rtol 1e-5: the two
backends sum in different orders). Run under qcclrun (2 ranks)."""
import datetime

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

import qccl.torch  # noqa: F401

STEPS = 4
RTOL = 1e-5


@pytest.fixture(scope="module")
def groups():
    dist.init_process_group("qccl", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    yield dist.group.WORLD, gloo
    dist.destroy_process_group()


def model():
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 4))


def batches():
    g = torch.Generator().manual_seed(99 + dist.get_rank())
    return [(torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g))
            for _ in range(STEPS)]


def train(m, norm_fn):
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    losses, norms = [], []
    for x, y in batches():
        opt.zero_grad()
        loss = nn.functional.mse_loss(m(x), y)
        loss.backward()
        norms.append(float(norm_fn(m)))
        opt.step()
        lt = loss.detach().clone()
        dist.all_reduce(lt, group=GLOO[0])  # the global loss, on one backend for both runs
        losses.append(lt.item() / dist.get_world_size())
    return losses, norms


GLOO = [None]


def compare(run, groups, colls):
    """Runs on qccl then gloo and compares; the qccl communicator's counters
    must show the collectives `colls` (so the run really went through it)."""
    world, gloo = groups
    GLOO[0] = gloo
    comm = qccl.torch.get_comm(world)
    comm.reset_stats()
    lq, nq = run(world)
    st = comm.stats()
    for c in colls:
        assert st[c]["calls"] > 0, (c, st[c])
    lg, ng = run(gloo)
    if dist.get_rank() == 0:
        print("qccl losses", lq, "norms", nq)
        print("gloo losses", lg, "norms", ng)
    torch.testing.assert_close(torch.tensor(lq), torch.tensor(lg), rtol=RTOL, atol=0)
    torch.testing.assert_close(torch.tensor(nq), torch.tensor(ng), rtol=RTOL, atol=0)
    assert lq[-1] < lq[0]  # it trains


def test_ddp(groups):
    from torch.nn.parallel import DistributedDataParallel as DDP

    def run(pg):
        m = DDP(model(), process_group=pg, bucket_cap_mb=0.01)  # several buckets
        return train(m, lambda m: nn.utils.clip_grad_norm_(m.parameters(), 1e9))
    compare(run, groups, ["all_reduce", "broadcast"])


def test_fsdp2(groups):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    def run(pg):
        mesh = DeviceMesh.from_group(pg, "cpu")
        m = model()
        for layer in m:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(m, mesh=mesh)
        return train(m, lambda m: nn.utils.clip_grad_norm_(m.parameters(), 1e9).full_tensor())
    compare(run, groups, ["all_gather", "reduce_scatter"])


def test_fsdp1(groups):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    def run(pg):
        m = FSDP(model(), process_group=pg, device_id=torch.device("cpu"),
                 use_orig_params=True)
        return train(m, lambda m: m.clip_grad_norm_(1e9))
    compare(run, groups, ["all_gather", "reduce_scatter"])
