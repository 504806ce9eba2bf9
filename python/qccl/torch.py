"""The torch.distributed backend "qccl".

    import qccl.torch                      # registers the backend
    torch.distributed.init_process_group("qccl", timeout=timedelta(seconds=60))

A backend written in Python (torch >= 2.15 accepts a subclass of
torch._C._distributed_c10d.Backend, registered with
Backend.register_backend(..., devices=["cpu"])), over qccl.Comm, for CPU
tensors. torch calls the creator with (store, rank, size, timeout) for the
default group and again, with a PrefixStore, for every new_group: rank 0 of
the group makes a qccl unique id and sets it in the store, the others read
it, and every rank joins with qcclCommInitRankConfig with timeoutSec = the
timeout given to torch (so a dead peer fails every survivor's call within
it, and every later call on that group fails too).

How each method maps onto qccl:
  allreduce             qcclAllReduce per tensor (SUM, AVG, PRODUCT, MIN,
                        MAX; PREMUL_SUM as a scale then SUM)
  broadcast, reduce     qcclBroadcast, qcclReduce
  allgather             qcclAllGather into one flat buffer, copied out to the
                        list (all_gather_single: straight into the output)
  reduce_scatter        the list concatenated, then qcclReduceScatter
                        (reduce_scatter_single: straight from the input)
  alltoall              grouped qcclSend/qcclRecv per peer
  all_to_all_single     qcclAlltoAll for equal splits, else grouped
                        qcclSend/qcclRecv with the split sizes
  gather, scatter       qcclGather, qcclScatter via one flat buffer
  send, recv            qcclSend, qcclRecv
  barrier               qcclBarrier
  *_coalesced, start/end_coalescing
                        the calls inside one qcclGroupStart/qcclGroupEnd
Tensors that qccl cannot take as they are (non-contiguous, int16, bool,
complex) go through a contiguous copy or a view of a type qccl has, and are
copied back when the call has completed.

Asynchrony: when the library has host streams, each backend owns one
qccl.Stream; every call is queued on it with one qccl.Event recorded after
it. Work.wait() is qcclEventSynchronize (then the copy-backs), and
get_future() gives a torch Future that a completion thread of the backend
completes, in queue order, with the output tensors (or the error). Without
host streams (an older libqccl, or QCCL_TORCH_STREAM=0) calls run with
stream NULL and return completed Works.

Work.is_completed(): torch wraps a Python Work in a C++ holder that does not
forward is_completed, so importing this module extends
torch.distributed.Work.is_completed to also report a Work whose future is
done (other backends' Works answer as before).

QCCL_POLICY applies to the communicators made here like to any other: e.g.
QCCL_POLICY=allgather:int8:b256 makes FSDP's all-gathers quantized.
get_comm(group) gives the qccl.Comm behind a group (for stats()).
"""
import datetime
import os
import queue
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Backend as _C10dBackend
from torch._C._distributed_c10d import ReduceOp

from . import _lib
from ._errors import QcclError
from ._types import RedOp
from .comm import Comm, get_unique_id, group_start, group_end
from . import stream as _stream

BACKEND_NAME = "qccl"
_UID_KEY = "qccl/unique_id"

_RED = {
    ReduceOp.RedOpType.SUM: RedOp.SUM,
    ReduceOp.RedOpType.AVG: RedOp.AVG,
    ReduceOp.RedOpType.PRODUCT: RedOp.PROD,
    ReduceOp.RedOpType.MIN: RedOp.MIN,
    ReduceOp.RedOpType.MAX: RedOp.MAX,
}

# types qccl has, by torch dtype
_NATIVE = {torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.float32,
           torch.float64, torch.bfloat16}
for _n in ("uint32", "uint64", "float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _n):
        _NATIVE.add(getattr(torch, _n))
# types carried in a wider one: (wider type, is it only for moving data)
_WIDEN = {torch.int16: torch.int32}
if hasattr(torch, "uint16"):
    _WIDEN[torch.uint16] = torch.int32


def _use_streams():
    v = os.environ.get("QCCL_TORCH_STREAM", "1")
    if v not in ("0", "1"):
        raise ValueError("QCCL_TORCH_STREAM=%r: expected 0 or 1" % v)
    return v == "1" and _stream.available()


# ---------------------------------------------------------------- Works


class _Work(dist._Work):
    """One call (or one coalesced group of calls) of the backend.

    event None: the call ran with stream NULL and is complete (err holds its
    error). Otherwise the call is queued and `event` completes after it.
    finish: callables run once, after completion, before the future is set
    (the copy-backs into the caller's tensors). result: the list of tensors
    the future carries."""

    def __init__(self, result, event=None, finish=(), keep=(), err=None):
        super().__init__()
        self._event = event
        self._finish = list(finish)
        self._keep = keep  # the buffers a queued call uses stay alive
        self._result = result
        self._lock = threading.Lock()
        self._done = False
        self._err = err
        self._fut = torch.futures.Future()
        self._settled = threading.Event()  # the future is set
        self._completer = None  # the thread that completes it
        if event is None:
            self._complete(err)

    def _complete(self, err):
        """Runs the copy-backs once and sets the future (any thread). A
        thread that finds another one completing waits until the future is
        set, so that wait() returns only once is_completed() and the future
        say done (the completion thread could otherwise still be between
        the two); the completing thread itself (a future's callback that
        waits on its Work) does not wait."""
        with self._lock:
            if self._done:
                if self._completer != threading.get_ident():
                    other = True
                else:
                    return
            else:
                other = False
                self._completer = threading.get_ident()
                if err is None:
                    try:
                        for f in self._finish:
                            f()
                    except Exception as e:  # a copy-back failed: the Work fails
                        err = e
                self._err = err
                self._done = True
                self._finish = []
                self._keep = ()
        if other:
            self._settled.wait()
            return
        try:
            if err is None:
                self._fut.set_result(self._result)
            else:
                self._fut.set_exception(err)
        finally:
            self._settled.set()

    def _sync(self):
        if self._event is not None:
            try:
                self._event.synchronize()
                err = None
            except QcclError as e:
                err = e
            self._complete(err)

    def wait(self, timeout=None):
        self._sync()
        if self._err is not None:
            raise self._err
        return True

    def is_completed(self):
        if self._done:
            return True
        try:
            if self._event is not None and self._event.query() is False:
                return False
        except QcclError:
            pass
        self._sync()
        return True

    def is_success(self):
        return self._done and self._err is None

    def exception(self):
        return self._err

    def get_future(self):
        return self._fut

    def result(self):
        return self._result


class _DeferredWork(_Work):
    """An op issued inside start/end_coalescing: it completes with the
    group's Work, made at end_coalescing."""

    def __init__(self, result, group):
        dist._Work.__init__(self)
        self._result = result
        self._group = group
        self._fut = torch.futures.Future()
        self._done = False
        self._err = None

    def _attach(self, work):
        def done(f):
            try:
                f.value()
                self._err = None
            except Exception as e:
                self._err = e
            self._done = True
            if self._err is None:
                self._fut.set_result(self._result)
            else:
                self._fut.set_exception(self._err)
        work.get_future().add_done_callback(done)
        self._group = work

    def wait(self, timeout=None):
        if not isinstance(self._group, _Work):
            raise RuntimeError("qccl: wait() on an op of a coalescing window that has not ended")
        self._group.wait()
        return True

    def is_completed(self):
        return isinstance(self._group, _Work) and self._group.is_completed()


_orig_is_completed = dist.Work.is_completed


def _is_completed(self):
    """torch's holder of a Python Work does not forward is_completed: ask
    the Work's future too. Works of other backends answer as before."""
    if _orig_is_completed(self):
        return True
    try:
        return self.get_future().done()
    except Exception:
        return False


try:
    dist.Work.is_completed = _is_completed
except (AttributeError, TypeError):  # pragma: no cover (a torch that forbids it)
    pass


class _Completer:
    """The backend's completion thread: takes queued Works in order, waits
    for each one's event and completes it (copy-backs, then the future)."""

    def __init__(self):
        self._q = queue.SimpleQueue()
        self._t = threading.Thread(target=self._run, name="qccl-completion", daemon=True)
        self._t.start()

    def _run(self):
        while True:
            w = self._q.get()
            if w is None:
                return
            w._sync()

    def put(self, work):
        self._q.put(work)

    def stop(self):
        self._q.put(None)
        self._t.join()


# ---------------------------------------------------------------- tensors


class _Prep:
    """Tensors as qccl takes them: each caller tensor gets a contiguous
    tensor of a qccl type (itself, a view, or a copy); copies are written
    back after completion when the caller's tensor is an output."""

    def __init__(self):
        self.finish = []
        self.keep = []

    def io(self, t, out=True, load=True):
        """The qccl-ready tensor for t. out: t receives data (copied back
        after completion). load: the call reads t's values (else a copy
        need not be filled)."""
        self.keep.append(t)
        if t.dtype in _NATIVE and t.is_contiguous():
            return t
        if t.dtype == torch.bool and t.is_contiguous():
            v = t.view(torch.uint8)
            self.keep.append(v)
            return v
        if t.is_complex() and t.is_contiguous():
            v = torch.view_as_real(t)
            self.keep.append(v)
            return v
        if t.dtype in _NATIVE:
            c = t.contiguous() if load else torch.empty(t.shape, dtype=t.dtype)
        elif t.dtype == torch.bool:
            c = t.to(torch.uint8, memory_format=torch.contiguous_format)
        elif t.is_complex():
            c = torch.view_as_real(t.contiguous())
        elif t.dtype in _WIDEN:
            c = t.to(_WIDEN[t.dtype], memory_format=torch.contiguous_format)
        else:
            raise TypeError("qccl: tensors of %s are not supported" % t.dtype)
        self.keep.append(c)
        if out:
            if t.is_complex():
                self.finish.append(lambda: t.copy_(torch.view_as_complex(c)))
            else:
                self.finish.append(lambda: t.copy_(c))
        return c

    def after(self, f):
        self.finish.append(f)


def _flat(t):
    return t.reshape(-1)


def _check_cpu(tensors, what):
    for t in tensors:
        if t.device.type != "cpu":
            raise ValueError("qccl backend: %s is a %s tensor; this version takes CPU tensors"
                             % (what, t.device.type))


def _red(op, t):
    """(qccl RedOp, scale factor or None) for a torch ReduceOp and tensor t."""
    kind = op.op
    if kind == ReduceOp.RedOpType.PREMUL_SUM:
        f = op.factor
        return RedOp.SUM, (f.item() if isinstance(f, torch.Tensor) else float(f))
    if kind not in _RED:
        raise ValueError("qccl backend: reduce op %s is not supported (SUM, AVG, PRODUCT, "
                         "MIN, MAX, PREMUL_SUM)" % kind)
    r = _RED[kind]
    if t.dtype == torch.bool:
        if r == RedOp.SUM:
            r = RedOp.MAX  # logical or, as gloo
        elif r == RedOp.PROD:
            r = RedOp.MIN  # logical and
        elif r == RedOp.AVG:
            raise ValueError("qccl backend: AVG of bool tensors")
    if t.is_complex() and r not in (RedOp.SUM, RedOp.AVG):
        raise ValueError("qccl backend: %s of complex tensors" % kind)
    if r == RedOp.AVG and not (t.is_floating_point() or t.is_complex()):
        raise ValueError("qccl backend: AVG needs a floating point tensor, got %s" % t.dtype)
    return r, None


# ---------------------------------------------------------------- the backend


class QcclBackend(_C10dBackend):
    """torch.distributed backend over one qccl communicator."""

    def __init__(self, store, rank, size, timeout, comm=None):
        super().__init__(rank, size)
        self._timeout = timeout
        self._options = _C10dBackend.Options(BACKEND_NAME, timeout=timeout)
        use_streams = _use_streams()  # a bad QCCL_TORCH_STREAM fails before the rendezvous
        if comm is None:
            comm = _join(store, rank, size, timeout)
        self._comm = comm
        self._stream = None
        self._completer = None
        if use_streams:
            self._stream = _stream.Stream()
            self._completer = _Completer()
        self._coalescing = None  # list of _DeferredWork while coalescing
        self._coal_prep = None

    # ---- torch's queries ----

    @property
    def options(self):
        return self._options

    @property
    def supports_splitting(self):
        return False

    @property
    def supports_coalescing(self):
        return True

    def getBackendName(self):
        return BACKEND_NAME

    @property
    def comm(self):
        return self._comm

    # ---- issuing ----

    def _issue(self, run, prep, result):
        """Runs `run(stream)` (the qccl calls) and returns the Work."""
        comm = self._comm
        if comm is None or comm.handle is None:
            raise RuntimeError("qccl backend: the process group was shut down or aborted")
        if self._coalescing is not None:
            run(self._stream)  # queued inside the group
            self._coal_prep.finish.extend(prep.finish)
            self._coal_prep.keep.extend(prep.keep)
            w = _DeferredWork(result, self)
            self._coalescing.append(w)
            return w
        if self._stream is None:
            run(None)
            return _Work(result, finish=prep.finish)
        run(self._stream)
        ev = _stream.Event()
        ev.record(self._stream)
        w = _Work(result, event=ev, finish=prep.finish, keep=prep.keep)
        self._completer.put(w)
        return w

    def start_coalescing(self):
        if self._coalescing is not None:
            raise RuntimeError("qccl backend: coalescing windows do not nest")
        group_start()
        self._coalescing = []
        self._coal_prep = _Prep()

    def end_coalescing(self):
        works, prep = self._coalescing, self._coal_prep
        self._coalescing = None
        self._coal_prep = None
        if works is None:
            raise RuntimeError("qccl backend: end_coalescing without start_coalescing")
        err = None
        try:
            group_end()
        except QcclError as e:
            err = e
        if err is not None or self._stream is None:
            w = _Work([], finish=prep.finish, err=err)
        else:
            ev = _stream.Event()
            ev.record(self._stream)
            w = _Work([], event=ev, finish=prep.finish, keep=prep.keep)
            self._completer.put(w)
        for d in works:
            d._attach(w)
        if err is not None:
            raise err
        return w

    def _grouped(self, calls, always=False):
        """run(stream) making `calls` (each a function of the stream) one
        qccl group (unless already inside a coalescing window; a lone call
        runs as it is unless `always`)."""
        def run(s):
            if self._coalescing is not None or (len(calls) == 1 and not always):
                for c in calls:
                    c(s)
                return
            group_start()
            ok = False
            try:
                for c in calls:
                    c(s)
                ok = True
            finally:
                r = _lib.lib.qcclGroupEnd()
                if ok:
                    _lib.check(r, what="qcclGroupEnd")
        return run

    # ---- collectives ----

    def allreduce(self, tensors, opts):
        _check_cpu(tensors, "allreduce tensor")
        prep = _Prep()
        calls = []
        for t in tensors:
            op, factor = _red(opts.reduceOp, t)
            if factor is not None:
                t.mul_(factor)
            q = prep.io(t)
            calls.append(lambda s, q=q, op=op: self._comm.all_reduce(q, op=op, stream=s))
        return self._issue(self._grouped(calls), prep, tensors)

    def allreduce_coalesced(self, tensors, opts):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts):
        _check_cpu(tensors, "broadcast tensor")
        prep = _Prep()
        root = opts.rootRank
        calls = []
        for t in tensors:
            q = prep.io(t, out=self.rank() != root, load=self.rank() == root)
            calls.append(lambda s, q=q: self._comm.broadcast(q, root=root, stream=s))
        return self._issue(self._grouped(calls), prep, tensors)

    def reduce(self, tensors, opts):
        _check_cpu(tensors, "reduce tensor")
        prep = _Prep()
        root = opts.rootRank
        calls = []
        for t in tensors:
            op, factor = _red(opts.reduceOp, t)
            if factor is not None:
                t.mul_(factor)
            q = prep.io(t, out=self.rank() == root)
            calls.append(lambda s, q=q, op=op: self._comm.reduce(q, op=op, root=root, stream=s))
        return self._issue(self._grouped(calls), prep, tensors)

    def _gather_into(self, prep, inp, outs):
        """A flat buffer for an all-gather of inp whose rank-i block is then
        copied into outs[i]; returns the call."""
        q = _flat(prep.io(inp, out=False))
        n = self.size()
        if len(outs) != n:
            raise ValueError("qccl backend: %d output tensors for %d ranks" % (len(outs), n))
        for o in outs:
            if o.numel() != inp.numel():
                raise ValueError("qccl backend: output tensor of %d elements for an input of %d"
                                 % (o.numel(), inp.numel()))
        flat = torch.empty(n * q.numel(), dtype=q.dtype)
        prep.keep.append(flat)

        def copy_out():
            for i, o in enumerate(outs):
                blk = flat[i * q.numel():(i + 1) * q.numel()]
                if inp.is_complex():
                    blk = torch.view_as_complex(blk.view(-1, 2))
                elif inp.dtype == torch.bool:
                    blk = blk.view(torch.bool)
                o.copy_(blk.view(o.shape))
        prep.after(copy_out)
        return lambda s: self._comm.all_gather(q, flat, stream=s)

    def allgather(self, output_tensors, input_tensors, opts):
        _check_cpu(input_tensors, "allgather input")
        prep = _Prep()
        calls = [self._gather_into(prep, inp, outs)
                 for outs, inp in zip(output_tensors, input_tensors)]
        return self._issue(self._grouped(calls), prep, output_tensors)

    def allgather_coalesced(self, output_lists, input_tensors, opts):
        return self.allgather(output_lists, input_tensors, opts)

    def _gather_single(self, prep, output, inp):
        if output.numel() != inp.numel() * self.size():
            raise ValueError("qccl backend: all_gather_into_tensor output has %d elements, "
                             "expected %d x %d" % (output.numel(), self.size(), inp.numel()))
        if output.dtype != inp.dtype:
            raise TypeError("qccl backend: output %s, input %s" % (output.dtype, inp.dtype))
        q = _flat(prep.io(inp, out=False))
        o = _flat(prep.io(output, load=False))
        return lambda s: self._comm.all_gather(q, o, stream=s)

    def all_gather_single(self, output, inp, opts):
        _check_cpu([output, inp], "all_gather_into_tensor tensor")
        prep = _Prep()
        return self._issue(self._grouped([self._gather_single(prep, output, inp)]), prep,
                           [output])

    def all_gather_single_coalesced(self, outputs, inputs, opts):
        _check_cpu(list(outputs) + list(inputs), "all_gather_into_tensor tensor")
        prep = _Prep()
        calls = [self._gather_single(prep, o, i) for o, i in zip(outputs, inputs)]
        return self._issue(self._grouped(calls), prep, list(outputs))

    def _rs_single(self, prep, output, inp, opts):
        if inp.numel() != output.numel() * self.size():
            raise ValueError("qccl backend: reduce_scatter_tensor input has %d elements, "
                             "expected %d x %d" % (inp.numel(), self.size(), output.numel()))
        if output.dtype != inp.dtype:
            raise TypeError("qccl backend: output %s, input %s" % (output.dtype, inp.dtype))
        op, factor = _red(opts.reduceOp, inp)
        if factor is not None:
            inp = inp * factor
        q = _flat(prep.io(inp, out=False))
        o = _flat(prep.io(output, load=False))
        return lambda s: self._comm.reduce_scatter(q, o, op=op, stream=s)

    def reduce_scatter_single(self, output, inp, opts):
        _check_cpu([output, inp], "reduce_scatter_tensor tensor")
        prep = _Prep()
        return self._issue(self._grouped([self._rs_single(prep, output, inp, opts)]), prep,
                           [output])

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        _check_cpu(list(outputs) + list(inputs), "reduce_scatter_tensor tensor")
        prep = _Prep()
        calls = [self._rs_single(prep, o, i, opts) for o, i in zip(outputs, inputs)]
        return self._issue(self._grouped(calls), prep, list(outputs))

    def reduce_scatter(self, output_tensors, input_lists, opts):
        _check_cpu(output_tensors, "reduce_scatter output")
        prep = _Prep()
        calls = []
        for out, ins in zip(output_tensors, input_lists):
            if len(ins) != self.size():
                raise ValueError("qccl backend: reduce_scatter with %d inputs for %d ranks"
                                 % (len(ins), self.size()))
            for i in ins:
                if i.numel() != out.numel() or i.dtype != out.dtype:
                    raise ValueError("qccl backend: reduce_scatter inputs must match the "
                                     "output's size and type")
            flat = torch.cat([_flat(i) for i in ins])
            calls.append(self._rs_single(prep, out, flat, opts))
        return self._issue(self._grouped(calls), prep, output_tensors)

    def alltoall(self, output_tensors, input_tensors, opts):
        _check_cpu(list(output_tensors) + list(input_tensors), "alltoall tensor")
        n = self.size()
        if len(output_tensors) != n or len(input_tensors) != n:
            raise ValueError("qccl backend: alltoall takes %d input and output tensors" % n)
        prep = _Prep()
        calls = []
        for peer in range(n):
            src = _flat(prep.io(input_tensors[peer], out=False))
            dst = _flat(prep.io(output_tensors[peer], load=False))
            calls.append(self._p2p_pair(src, dst, peer))
        return self._issue(self._grouped_p2p(calls), prep, list(output_tensors))

    def _p2p_pair(self, src, dst, peer):
        c = self._comm
        me = self.rank()

        def call(s):
            if peer == me:
                if src.numel():
                    dst.copy_(src)
                return
            if src.numel():
                c.send(src, peer, stream=s)
            if dst.numel():
                c.recv(dst, peer, stream=s)
        return call

    def _grouped_p2p(self, calls):
        """Sends and receives must be in one group (they depend on each other)."""
        return self._grouped(calls, always=True)

    def all_to_all_single(self, output, inp, output_split_sizes, input_split_sizes, opts):
        _check_cpu([output, inp], "all_to_all_single tensor")
        n = self.size()
        prep = _Prep()
        if not output_split_sizes and not input_split_sizes:
            if inp.numel() != output.numel() or inp.numel() % n:
                raise ValueError("qccl backend: all_to_all_single needs equal input and output "
                                 "sizes divisible by %d (got %d, %d)"
                                 % (n, inp.numel(), output.numel()))
            q = _flat(prep.io(inp, out=False))
            o = _flat(prep.io(output, load=False))
            return self._issue(self._grouped([lambda s: self._comm.all_to_all(q, o, stream=s)]),
                               prep, [output])
        in_rows = inp.size(0) if inp.dim() else 1
        out_rows = output.size(0) if output.dim() else 1
        in_row = inp.numel() // in_rows if in_rows else 0
        out_row = output.numel() // out_rows if out_rows else 0
        ins = list(input_split_sizes) or [in_rows // n] * n
        outs = list(output_split_sizes) or [out_rows // n] * n
        if len(ins) != n or len(outs) != n or sum(ins) != in_rows or sum(outs) != out_rows:
            raise ValueError("qccl backend: all_to_all_single split sizes %s / %s do not match "
                             "%d ranks and %d / %d rows" % (outs, ins, n, out_rows, in_rows))
        q = _flat(prep.io(inp, out=False))
        o = _flat(prep.io(output, load=False))
        k = q.numel() // max(inp.numel(), 1) if inp.numel() else 1  # complex: 2 reals
        calls = []
        ioff = ooff = 0
        for peer in range(n):
            ic, oc = ins[peer] * in_row * k, outs[peer] * out_row * k
            calls.append(self._p2p_pair(q[ioff:ioff + ic], o[ooff:ooff + oc], peer))
            ioff += ic
            ooff += oc
        return self._issue(self._grouped_p2p(calls), prep, [output])

    def alltoall_base(self, output, inp, output_split_sizes, input_split_sizes, opts):
        return self.all_to_all_single(output, inp, output_split_sizes, input_split_sizes, opts)

    def gather(self, output_tensors, input_tensors, opts):
        _check_cpu(input_tensors, "gather input")
        root = opts.rootRank
        prep = _Prep()
        calls = []
        for idx, inp in enumerate(input_tensors):
            q = _flat(prep.io(inp, out=False))
            if self.rank() == root:
                outs = output_tensors[idx]
                if len(outs) != self.size():
                    raise ValueError("qccl backend: gather on root takes %d outputs"
                                     % self.size())
                flat = torch.empty(self.size() * q.numel(), dtype=q.dtype)
                prep.keep.append(flat)

                def copy_out(flat=flat, outs=outs, m=q.numel(), inp=inp):
                    for i, o in enumerate(outs):
                        blk = flat[i * m:(i + 1) * m]
                        if inp.is_complex():
                            blk = torch.view_as_complex(blk.view(-1, 2))
                        elif inp.dtype == torch.bool:
                            blk = blk.view(torch.bool)
                        o.copy_(blk.view(o.shape))
                prep.after(copy_out)
                calls.append(lambda s, q=q, f=flat: self._comm.gather(q, f, root=root, stream=s))
            else:
                calls.append(lambda s, q=q: self._comm.gather(q, None, root=root, stream=s))
        return self._issue(self._grouped(calls), prep, output_tensors)

    def scatter(self, output_tensors, input_tensors, opts):
        _check_cpu(output_tensors, "scatter output")
        root = opts.rootRank
        prep = _Prep()
        calls = []
        for idx, out in enumerate(output_tensors):
            o = _flat(prep.io(out, load=False))
            if self.rank() == root:
                ins = input_tensors[idx]
                if len(ins) != self.size():
                    raise ValueError("qccl backend: scatter on root takes %d inputs"
                                     % self.size())
                flat = torch.cat([_flat(prep.io(i, out=False)) for i in ins])
                prep.keep.append(flat)
                calls.append(lambda s, o=o, f=flat: self._comm.scatter(f, o, root=root, stream=s))
            else:
                calls.append(lambda s, o=o: self._comm.scatter(None, o, root=root, stream=s))
        return self._issue(self._grouped(calls), prep, output_tensors)

    def send(self, tensors, dst, tag=0):
        _check_cpu(tensors, "send tensor")
        prep = _Prep()
        qs = [_flat(prep.io(t, out=False)) for t in tensors]
        calls = [lambda s, q=q: self._comm.send(q, dst, stream=s) for q in qs]
        return self._issue(self._grouped(calls), prep, tensors)

    def recv(self, tensors, src, tag=0):
        _check_cpu(tensors, "recv tensor")
        prep = _Prep()
        qs = [_flat(prep.io(t, load=False)) for t in tensors]
        calls = [lambda s, q=q: self._comm.recv(q, src, stream=s) for q in qs]
        return self._issue(self._grouped(calls), prep, tensors)

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError("qccl backend: recv from any source is not supported (name the "
                           "source rank)")

    def barrier(self, opts):
        return self._issue(lambda s: self._comm.barrier(stream=s), _Prep(), [])

    # ---- lifecycle ----

    def shutdown(self):
        comm, self._comm = self._comm, None
        if self._completer is not None:
            try:
                if self._stream is not None:
                    self._stream.synchronize()
            except QcclError:
                pass
            self._completer.stop()
            self._completer = None
        if self._stream is not None:
            try:
                self._stream.destroy()
            except QcclError:
                pass
            self._stream = None
        if comm is not None and comm.handle is not None:
            try:
                comm.destroy()
            except QcclError:
                pass

    def abort(self):
        comm, self._comm = self._comm, None
        if comm is not None and comm.handle is not None:
            comm.abort()


def _join(store, rank, size, timeout):
    """The unique-id flow over torch's store: rank 0 makes the id and sets
    it, the others wait for it; then every rank joins."""
    if rank == 0:
        uid = get_unique_id()
        store.set(_UID_KEY, bytes(uid))
    else:
        store.wait([_UID_KEY])
        uid = bytes(store.get(_UID_KEY))
    t = timeout if isinstance(timeout, datetime.timedelta) else None
    return Comm.init_rank(size, uid, rank, timeout=t, name="torch")


def _create(store, rank, size, timeout):
    return QcclBackend(store, rank, size, timeout)


def get_backend(group=None):
    """The QcclBackend of a process group (default: the default group)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    b = pg._get_backend(torch.device("cpu"))
    if not isinstance(b, QcclBackend):
        raise ValueError("group: not a qccl process group (its backend is %s)"
                         % type(b).__name__)
    return b


def get_comm(group=None):
    """The qccl.Comm behind a process group of this backend (default: the
    default group), e.g. for get_comm().stats()."""
    return get_backend(group).comm


def is_async(group=None):
    """True if the group's calls are queued on a host stream (Works complete
    later), False if they run with stream NULL (Works come back complete)."""
    return get_backend(group)._stream is not None


def register():
    """Registers "qccl" with torch.distributed (done at import; idempotent)."""
    if hasattr(dist.Backend, BACKEND_NAME.upper()):
        return
    dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu"])


register()
