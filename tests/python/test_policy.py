"""QCCL_POLICY reaches torch users without a code change: run with
QCCL_POLICY=allgather:int8:b256 in the environment (tests/python/meson.build),
FSDP2's all-gathers of f32 parameters become qwZ all-gathers (int8 on the
wire), as the counters of the group's communicator show, and training still
tracks gloo's losses (within the int8 error). 2 ranks under qcclrun."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

import qccl.torch  # noqa: F401

STEPS = 4


def test_fsdp2_allgathers_quantized_by_env():
    assert os.environ.get("QCCL_POLICY", "").startswith("allgather:int8"), \
        "run with QCCL_POLICY=allgather:int8:b256"
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    dist.init_process_group("qccl", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    comm = qccl.torch.get_comm()

    def run(pg):
        torch.manual_seed(1234)
        m = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 4))
        mesh = DeviceMesh.from_group(pg, "cpu")
        for layer in m:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(m, mesh=mesh)
        opt = torch.optim.SGD(m.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(99 + dist.get_rank())
        losses = []
        for _ in range(STEPS):
            x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
            opt.zero_grad()
            loss = nn.functional.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            lt = loss.detach().clone()
            dist.all_reduce(lt, group=gloo)
            losses.append(lt.item() / dist.get_world_size())
        return losses

    comm.reset_stats()
    lq = run(dist.group.WORLD)
    st = comm.stats()
    lg = run(gloo)
    print("qccl+policy", lq, "gloo", lg)
    print({k: v for k, v in st.items() if v["calls"]})
    assert st["all_gather_q"]["calls"] >= 3 * STEPS, st["all_gather_q"]
    assert st["all_gather"]["calls"] == 0, st["all_gather"]
    assert st["reduce_scatter"]["calls"] > 0  # not in the policy: plain
    for a, b in zip(lq, lg):
        assert abs(a - b) <= 0.02 * abs(b), (lq, lg)
    dist.destroy_process_group()
