"""Failures through the "qccl" backend on real ranks (3, under qcclrun):
the timeout given to torch is the communicator's (a silent peer fails the
others' call with qccl's timeout after that many seconds, not the default
600), and a dead peer makes the call raise on every survivor within it,
synchronous and asynchronous, and every later call on that group too."""
import datetime
import os
import time

import pytest
import torch
import torch.distributed as dist

import qccl
import qccl.torch  # noqa: F401

TIMEOUT = 4  # seconds, given to torch
SLACK = float(os.environ.get("QCCL_MR_FAULT_SLACK", "6"))


@pytest.fixture(scope="module")
def world():
    # the default group waits long (ranks reach it at different times here);
    # each test's own group gets TIMEOUT
    dist.init_process_group("qccl", timeout=datetime.timedelta(seconds=60))
    x = torch.ones(8)
    dist.all_reduce(x)  # everyone is there
    assert (x == dist.get_world_size()).all()
    return dist.get_rank(), dist.get_world_size()


def test_silent_peer_times_out(world):
    r, W = world
    g = dist.new_group(list(range(W)), timeout=datetime.timedelta(seconds=TIMEOUT))
    x = torch.ones(1000)
    dist.all_reduce(x, group=g)
    if r == W - 1:
        time.sleep(TIMEOUT + 4)  # silent, but alive
        with pytest.raises(qccl.QcclError):
            dist.all_reduce(x, group=g)  # the others gave up: this fails too
        return
    t0 = time.monotonic()
    with pytest.raises(qccl.QcclError) as e:
        dist.all_reduce(x, group=g)
    dt = time.monotonic() - t0
    print("rank %d: %.1f s: %s" % (r, dt, e.value))
    assert e.value.result in (qccl.Result.TIMEOUT, qccl.Result.REMOTE_ERROR)
    assert TIMEOUT - 1 <= dt <= TIMEOUT + SLACK, dt
    t0 = time.monotonic()
    with pytest.raises(qccl.QcclError):
        dist.broadcast(x, 0, group=g)  # the group stays failed
    assert time.monotonic() - t0 < 2


def test_dead_peer(world):
    r, W = world
    dist.barrier()
    g = dist.new_group(list(range(W)), timeout=datetime.timedelta(seconds=TIMEOUT))
    x = torch.ones(100000)
    dist.all_reduce(x, group=g)
    if r == W - 1:
        os._exit(0)  # dies without a word: no destroy, no abort
    t0 = time.monotonic()
    with pytest.raises(qccl.QcclError) as e:
        w = dist.all_reduce(x, async_op=True, group=g)
        w.wait()
    dt = time.monotonic() - t0
    print("rank %d: %.1f s: %s" % (r, dt, e.value))
    assert dt <= TIMEOUT + SLACK, dt
    with pytest.raises(qccl.QcclError):
        dist.all_gather_into_tensor(torch.empty(W * 4), torch.ones(4), group=g)
