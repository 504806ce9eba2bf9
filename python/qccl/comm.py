"""qccl.Comm: a communicator and its collectives on NumPy arrays and torch
CPU tensors.

Counts come from the buffers: all_reduce(x) reduces x.size elements, in
place unless recv is given; all_gather(x) returns (or fills) nranks * x.size
elements; reduce_scatter(x) returns x.size / nranks. Send and receive
buffers must have the same element type. With stream=None a call returns
when done; with a qccl.Stream it is queued (the buffers must stay alive
until the stream has passed it). A failed call raises qccl.QcclError with
the communicator's last error message.
"""
import contextlib
import ctypes
import datetime

from . import _lib
from ._buffers import buf, empty_like
from ._types import DataType, StatColl, red_op, stat_coll
from .codec import QuantSpec, rsq_config_of, spec_of
from .stream import handle_of


class UniqueId(bytes):
    """The 128-byte rendezvous id (qcclUniqueId): send it to every rank."""


def get_unique_id():
    """Makes a rendezvous id on this rank (normally rank 0): it opens the
    root's listener. Every rank then calls Comm.init_rank with it."""
    u = _lib.UniqueIdStruct()
    _lib.check(_lib.lib.qcclGetUniqueId(ctypes.byref(u)), what="qcclGetUniqueId")
    return UniqueId(ctypes.string_at(ctypes.addressof(u), _lib.UNIQUE_ID_BYTES))


def _timeout_seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    t = int(-(-float(timeout) // 1))  # whole seconds, rounded up
    if t <= 0:
        raise ValueError("timeout: must be positive, got %r" % (timeout,))
    return min(t, 2**31 - 1)


def _config(timeout=None, name=None):
    if timeout is None and name is None:
        return None
    c = _lib.ConfigStruct()
    c.size = ctypes.sizeof(_lib.ConfigStruct)
    c.magic = _lib.CONFIG_MAGIC
    c.version = _lib.version()
    c.blocking = _lib.CONFIG_UNDEF_INT
    c.commName = name.encode() if name else None
    t = _timeout_seconds(timeout)
    c.timeoutSec = _lib.CONFIG_UNDEF_INT if t is None else t
    return c


def _cfg_ref(c):
    return ctypes.byref(c) if c is not None else None


class NodeInfo(tuple):
    __slots__ = ()
    _fields = ("node", "nnodes", "local_rank", "local_size")

    def __new__(cls, node, nnodes, local_rank, local_size):
        return tuple.__new__(cls, (node, nnodes, local_rank, local_size))

    node = property(lambda s: s[0])
    nnodes = property(lambda s: s[1])
    local_rank = property(lambda s: s[2])
    local_size = property(lambda s: s[3])

    def __repr__(self):
        return "NodeInfo(node=%d, nnodes=%d, local_rank=%d, local_size=%d)" % self


class Comm:
    """A qccl communicator. Make one with Comm.from_env() (torchrun, qcclrun,
    mpirun, srun) or Comm.init_rank(nranks, get_unique_id() on rank 0, rank)."""

    def __init__(self, handle, _owner=True):
        self.handle = handle
        r = ctypes.c_int()
        n = ctypes.c_int()
        _lib.check(_lib.lib.qcclCommUserRank(handle, ctypes.byref(r)), handle)
        _lib.check(_lib.lib.qcclCommCount(handle, ctypes.byref(n)), handle)
        self.rank = r.value
        self.size = n.value

    # ---- creation ----

    @classmethod
    def from_env(cls):
        h = ctypes.c_void_p()
        _lib.check(_lib.lib.qcclCommInitFromEnv(ctypes.byref(h)), what="qcclCommInitFromEnv")
        return cls(h.value)

    @classmethod
    def init_rank(cls, nranks, unique_id, rank, timeout=None, name=None):
        """Joins communicator `unique_id` as `rank` of `nranks` (collective).
        timeout (seconds or timedelta) overrides QCCL_TIMEOUT for it."""
        if not isinstance(unique_id, (bytes, bytearray)) or len(unique_id) != _lib.UNIQUE_ID_BYTES:
            raise ValueError("unique_id: expected the %d bytes of get_unique_id()"
                             % _lib.UNIQUE_ID_BYTES)
        u = _lib.UniqueIdStruct()
        ctypes.memmove(ctypes.addressof(u), bytes(unique_id), _lib.UNIQUE_ID_BYTES)
        h = ctypes.c_void_p()
        c = _config(timeout, name)
        _lib.check(_lib.lib.qcclCommInitRankConfig(ctypes.byref(h), int(nranks), u, int(rank),
                                                   _cfg_ref(c)), what="qcclCommInitRank")
        return cls(h.value)

    def split(self, color, key=None, timeout=None, name=None):
        """qcclCommSplit: ranks of equal color form a communicator, ordered by
        key (default: the rank). color None or negative gives None."""
        h = ctypes.c_void_p()
        c = _config(timeout, name)
        col = -1 if color is None else int(color)
        k = self.rank if key is None else int(key)
        self._check(_lib.lib.qcclCommSplit(self.handle, col, k, ctypes.byref(h), _cfg_ref(c)))
        return Comm(h.value) if h.value else None

    def _split_topo(self, fname, timeout, name):
        h = ctypes.c_void_p()
        c = _config(timeout, name)
        self._check(getattr(_lib.lib, fname)(self.handle, _cfg_ref(c), ctypes.byref(h)))
        return Comm(h.value) if h.value else None

    def split_node(self, timeout=None, name=None):
        """The ranks on this rank's node (the new rank is the local rank)."""
        return self._split_topo("qcclCommSplitNode", timeout, name)

    def split_rail(self, timeout=None, name=None):
        """The ranks with this rank's local rank, one per node."""
        return self._split_topo("qcclCommSplitRail", timeout, name)

    def split_leaders(self, timeout=None, name=None):
        """The node leaders (local rank 0); None on other ranks."""
        return self._split_topo("qcclCommSplitLeaders", timeout, name)

    def node_info(self):
        v = [ctypes.c_int() for _ in range(4)]
        self._check(_lib.lib.qcclCommNodeInfo(self.handle, *[ctypes.byref(x) for x in v]))
        return NodeInfo(*[x.value for x in v])

    # ---- lifecycle ----

    def _live(self):
        if self.handle is None:
            raise ValueError("comm: destroyed or aborted")
        return self.handle

    def _check(self, result):
        _lib.check(result, self.handle)

    def async_error(self):
        """The communicator's first asynchronous error as a QcclError, or None."""
        r = ctypes.c_int()
        self._check(_lib.lib.qcclCommGetAsyncError(self._live(), ctypes.byref(r)))
        if r.value == 0:
            return None
        from ._errors import QcclError
        return QcclError(r.value, _lib.last_error(self.handle))

    def finalize(self):
        self._check(_lib.lib.qcclCommFinalize(self._live()))

    def destroy(self):
        if self.handle is not None:
            h, self.handle = self.handle, None
            _lib.check(_lib.lib.qcclCommDestroy(h))

    def abort(self):
        if self.handle is not None:
            h, self.handle = self.handle, None
            _lib.check(_lib.lib.qcclCommAbort(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    # ---- helpers ----

    @staticmethod
    def _same_type(a, b, bname):
        if a.dtype != b.dtype:
            raise TypeError("%s: element type %s differs from sendbuff's %s"
                            % (bname, b.dtype.name, a.dtype.name))

    def _recv(self, send, recv, count):
        """The receive buffer: `recv` checked for `count` elements, or a new one."""
        if recv is None:
            recv = empty_like(send.obj, count)
        r = buf(recv, "recvbuff", writable=True)
        self._same_type(send, r, "recvbuff")
        if r.count != count:
            raise ValueError("recvbuff: %d elements, expected %d" % (r.count, count))
        return r

    def _split_count(self, n, what):
        if n % self.size:
            raise ValueError("sendbuff: %d elements is not a multiple of the %d ranks (%s)"
                             % (n, self.size, what))
        return n // self.size

    # ---- collectives ----

    def all_reduce(self, sendbuff, recvbuff=None, op="sum", stream=None):
        """Reduces sendbuff over all ranks into recvbuff (default: in place)."""
        s = buf(sendbuff, "sendbuff", writable=recvbuff is None)
        r = self._recv(s, sendbuff if recvbuff is None else recvbuff, s.count)
        self._check(_lib.lib.qcclAllReduce(s.ptr, r.ptr, s.count, int(s.dtype), int(red_op(op)),
                                           self._live(), handle_of(stream)))
        return r.obj

    def broadcast(self, sendbuff, recvbuff=None, root=0, stream=None):
        """root's sendbuff into recvbuff on every rank (default: in place)."""
        s = buf(sendbuff, "sendbuff", writable=recvbuff is None)
        r = self._recv(s, sendbuff if recvbuff is None else recvbuff, s.count)
        self._check(_lib.lib.qcclBroadcast(s.ptr, r.ptr, s.count, int(s.dtype), int(root),
                                           self._live(), handle_of(stream)))
        return r.obj

    def reduce(self, sendbuff, recvbuff=None, op="sum", root=0, stream=None):
        """Reduces into recvbuff on root (default: in place)."""
        s = buf(sendbuff, "sendbuff", writable=recvbuff is None)
        r = self._recv(s, sendbuff if recvbuff is None else recvbuff, s.count)
        self._check(_lib.lib.qcclReduce(s.ptr, r.ptr, s.count, int(s.dtype), int(red_op(op)),
                                        int(root), self._live(), handle_of(stream)))
        return r.obj

    def all_gather(self, sendbuff, recvbuff=None, stream=None):
        """Returns (or fills) nranks * sendbuff.size elements, rank i's at i * size."""
        s = buf(sendbuff, "sendbuff")
        r = self._recv(s, recvbuff, s.count * self.size)
        self._check(_lib.lib.qcclAllGather(s.ptr, r.ptr, s.count, int(s.dtype), self._live(),
                                           handle_of(stream)))
        return r.obj

    def reduce_scatter(self, sendbuff, recvbuff=None, op="sum", stream=None):
        """Block i of the reduction of sendbuff (nranks blocks) lands on rank i."""
        s = buf(sendbuff, "sendbuff")
        n = self._split_count(s.count, "reduce_scatter")
        r = self._recv(s, recvbuff, n)
        self._check(_lib.lib.qcclReduceScatter(s.ptr, r.ptr, n, int(s.dtype), int(red_op(op)),
                                               self._live(), handle_of(stream)))
        return r.obj

    def all_to_all(self, sendbuff, recvbuff=None, stream=None):
        """Block j of sendbuff goes to rank j; rank i's lands in block i."""
        s = buf(sendbuff, "sendbuff")
        n = self._split_count(s.count, "all_to_all")
        r = self._recv(s, recvbuff, s.count)
        self._check(_lib.lib.qcclAlltoAll(s.ptr, r.ptr, n, int(s.dtype), self._live(),
                                          handle_of(stream)))
        return r.obj

    def gather(self, sendbuff, recvbuff=None, root=0, stream=None):
        """Every rank's sendbuff into recvbuff on root (nranks * size elements;
        allocated there if None). Returns recvbuff on root, None elsewhere."""
        s = buf(sendbuff, "sendbuff")
        if self.rank == root:
            r = self._recv(s, recvbuff, s.count * self.size)
            ptr, out = r.ptr, r.obj
        else:
            ptr, out = (buf(recvbuff, "recvbuff").ptr if recvbuff is not None else None), None
        self._check(_lib.lib.qcclGather(s.ptr, ptr, s.count, int(s.dtype), int(root),
                                        self._live(), handle_of(stream)))
        return out

    def scatter(self, sendbuff, recvbuff, root=0, stream=None):
        """Block i of root's sendbuff (nranks * recvbuff.size) into recvbuff of rank i.
        sendbuff is read on root only (may be None elsewhere)."""
        r = buf(recvbuff, "recvbuff", writable=True)
        ptr = None
        if self.rank == root:
            s = buf(sendbuff, "sendbuff")
            self._same_type(s, r, "recvbuff")
            if s.count != r.count * self.size:
                raise ValueError("sendbuff: %d elements, expected nranks * %d"
                                 % (s.count, r.count))
            ptr = s.ptr
        self._check(_lib.lib.qcclScatter(ptr, r.ptr, r.count, int(r.dtype), int(root),
                                         self._live(), handle_of(stream)))
        return r.obj

    def send(self, sendbuff, peer, stream=None):
        s = buf(sendbuff, "sendbuff")
        self._check(_lib.lib.qcclSend(s.ptr, s.count, int(s.dtype), int(peer), self._live(),
                                      handle_of(stream)))

    def recv(self, recvbuff, peer, stream=None):
        r = buf(recvbuff, "recvbuff", writable=True)
        self._check(_lib.lib.qcclRecv(r.ptr, r.count, int(r.dtype), int(peer), self._live(),
                                      handle_of(stream)))
        return r.obj

    def barrier(self, stream=None):
        self._check(_lib.lib.qcclBarrier(self._live(), handle_of(stream)))

    # ---- ZeRO++ ----

    def all_gather_q(self, sendbuff, recvbuff=None, spec=None, stream=None):
        """qwZ: quantized all-gather (spec: QuantSpec, default int8 B=256)."""
        s = buf(sendbuff, "sendbuff")
        r = self._recv(s, recvbuff, s.count * self.size)
        sp = (spec_of(spec) or QuantSpec())._struct()
        self._check(_lib.lib.qcclAllGatherQ(s.ptr, r.ptr, s.count, int(s.dtype),
                                            ctypes.byref(sp), self._live(), handle_of(stream)))
        return r.obj

    def reduce_scatter_q(self, sendbuff, recvbuff=None, op="sum", config=None, stream=None):
        """qgZ: hierarchical quantized reduce-scatter (config: ReduceScatterQConfig)."""
        s = buf(sendbuff, "sendbuff")
        n = self._split_count(s.count, "reduce_scatter_q")
        r = self._recv(s, recvbuff, n)
        cfg = rsq_config_of(config)
        c = cfg._struct() if cfg is not None else None
        self._check(_lib.lib.qcclReduceScatterQ(s.ptr, r.ptr, n, int(s.dtype), int(red_op(op)),
                                                _cfg_ref(c), self._live(), handle_of(stream)))
        return r.obj

    def all_reduce_q(self, sendbuff, recvbuff=None, op="sum", config=None, stream=None):
        """Quantized all-reduce (qgZ reduce-scatter, then qwZ gather); in place by default."""
        s = buf(sendbuff, "sendbuff", writable=recvbuff is None)
        r = self._recv(s, sendbuff if recvbuff is None else recvbuff, s.count)
        cfg = rsq_config_of(config)
        c = cfg._struct() if cfg is not None else None
        self._check(_lib.lib.qcclAllReduceQ(s.ptr, r.ptr, s.count, int(s.dtype), int(red_op(op)),
                                            _cfg_ref(c), self._live(), handle_of(stream)))
        return r.obj

    def residual_count(self, recvcount, config=None):
        """Floats of a caller-owned error-feedback residual for reduce_scatter_q."""
        cfg = rsq_config_of(config)
        c = cfg._struct() if cfg is not None else None
        out = ctypes.c_size_t()
        self._check(_lib.lib.qcclReduceScatterQResidualCount(self._live(), int(recvcount),
                                                             _cfg_ref(c), ctypes.byref(out)))
        return out.value

    def secondary(self, sendcount, dtype, storage=None):
        """A secondary weight shard (hpZ) for gathers of sendcount elements."""
        return Secondary(self, sendcount, dtype, storage)

    # ---- policies and counters ----

    def set_policy(self, collective, spec, min_bytes=0):
        """Makes plain calls of collective ("allgather", "reducescatter",
        "allreduce") quantized under spec when their full buffer is at least
        min_bytes; spec None makes them plain again."""
        sp = spec_of(spec)
        st = sp._struct() if sp is not None else None
        self._check(_lib.lib.qcclCommSetPolicy(self._live(), int(stat_coll(collective)),
                                               ctypes.byref(st) if st is not None else None,
                                               int(min_bytes)))

    def stats(self):
        """Traffic counters: {collective name: {calls, bytes_intra, bytes_inter}},
        collective names as in qccl.StatColl in lower case, plus "total"."""
        s = _lib.StatsStruct()
        s.size = ctypes.sizeof(_lib.StatsStruct)
        self._check(_lib.lib.qcclCommGetStats(self._live(), ctypes.byref(s)))

        def d(c):
            return {"calls": c.calls, "bytes_intra": c.bytesIntra, "bytes_inter": c.bytesInter}

        out = {k.name.lower(): d(s.coll[int(k)]) for k in StatColl}
        out["total"] = d(s.total)
        return out

    def reset_stats(self):
        self._check(_lib.lib.qcclCommResetStats(self._live()))

    # ---- groups ----

    @staticmethod
    @contextlib.contextmanager
    def group():
        """qcclGroupStart / qcclGroupEnd around the block."""
        group_start()
        ok = False
        try:
            yield
            ok = True
        finally:
            r = _lib.lib.qcclGroupEnd()
            if ok:
                _lib.check(r, what="qcclGroupEnd")


def group_start():
    _lib.check(_lib.lib.qcclGroupStart(), what="qcclGroupStart")


def group_end():
    _lib.check(_lib.lib.qcclGroupEnd(), what="qcclGroupEnd")


class Secondary:
    """hpZ: a secondary weight shard (qcclSecondary_t). Fill it with
    all_gather_q(..., generation) during the forward gather, read it with
    node_all_gather(generation) during backward."""

    def __init__(self, comm, sendcount, dtype, storage=None):
        from .codec import _dtype_arg
        self.comm = comm
        self.sendcount = int(sendcount)
        self.dtype = _dtype_arg(dtype, DataType.FLOAT32)
        st = spec_of(storage, "storage")
        sts = st._struct() if st is not None else None
        h = ctypes.c_void_p()
        comm._check(_lib.lib.qcclSecondaryCreate(comm._live(), self.sendcount, int(self.dtype),
                                                 ctypes.byref(sts) if sts is not None else None,
                                                 ctypes.byref(h)))
        self.handle = h.value

    def all_gather_q(self, sendbuff, recvbuff=None, spec=None, generation=0, stream=None):
        """The forward gather that also fills this shard (spec None: plain precision)."""
        c = self.comm
        s = buf(sendbuff, "sendbuff")
        r = c._recv(s, recvbuff, s.count * c.size)
        sp = spec_of(spec)
        sps = sp._struct() if sp is not None else None
        c._check(_lib.lib.qcclAllGatherQSecondary(
            s.ptr, r.ptr, s.count, int(s.dtype), ctypes.byref(sps) if sps is not None else None,
            self.handle, int(generation), c._live(), handle_of(stream)))
        return r.obj

    def node_all_gather(self, recvbuff, generation=0, stream=None):
        """The node-local gather of the shards into recvbuff (nranks * sendcount)."""
        r = buf(recvbuff, "recvbuff", writable=True)
        if r.count != self.sendcount * self.comm.size or r.dtype != self.dtype:
            raise ValueError("recvbuff: expected %d elements of %s"
                             % (self.sendcount * self.comm.size, self.dtype.name))
        self.comm._check(_lib.lib.qcclSecondaryAllGather(self.handle, r.ptr, int(generation),
                                                         handle_of(stream)))
        return r.obj

    def invalidate(self):
        self.comm._check(_lib.lib.qcclSecondaryInvalidate(self.handle))

    def destroy(self):
        if self.handle is not None:
            h, self.handle = self.handle, None
            _lib.check(_lib.lib.qcclSecondaryDestroy(h))
