"""qccl.zero: the ZeRO engine (libqccl_zero, include/qccl_zero.h) driven
from a torch model, in DeepSpeed's shape.

    engine = qccl.zero.initialize(model, config="ds_config.json")
    loss = loss_fn(engine(batch), target)
    engine.backward(loss)
    engine.step()
    engine.save_checkpoint(dir); engine.load_checkpoint(dir)

The engine registers every parameter of the model in named_parameters()
order (initial values as they are on each rank: the same seed on every
rank, as with DeepSpeed), then drives the C engine from module hooks:

  forward pre-hook of a module with parameters: qcclZeroGather(Forward) of
    each of its parameters, copied into the parameter's tensor, then
    qcclZeroRelease (the C engine frees a stage-3 full copy; its recorded
    order lets it prefetch the next gathers on a host stream);
  forward post-hook: the parameters' tensors are emptied again (stage 3);
  backward pre-hook (full_backward_pre_hook): qcclZeroGather(Backward)
    (stage 3 gathers again, from the hpZ secondary shard when configured);
  post-accumulate-grad hook of each parameter: qcclZeroGradient with its
    gradient, which is then dropped (stages 2-3 reduce-scatter buckets as
    they fill; qgZ when zero_quantized_gradients);
  engine.step(): qcclZeroStep (norm, clipping, overflow skip, optimizer on
    the fp32 master shard, publication).

Parameters never reached by backward get a zero gradient before the step
(the C engine wants every gradient once per micro-step). The communicator
is the default process group's when it is a "qccl" group, else
qccl.Comm.from_env(). Parameter dtypes: float32, bfloat16, float16.
"""
import ctypes
import json
import os
import tempfile

import torch

from . import _lib
from ._errors import QcclError
from ._types import from_torch_dtype, DataType

_ZERO_MAGIC = 0x71C2E401


def _load_zero():
    env = os.environ.get("QCCL_ZERO_LIBRARY")
    cands = [env] if env else []
    here = os.path.dirname(os.path.abspath(__file__))
    base = os.path.dirname(_lib.path)
    cands += [os.path.join(here, "libqccl_zero.so"),
              os.path.join(base, "zero", "libqccl_zero.so.1"),  # beside build/src/libqccl.so
              os.path.join(base, "libqccl_zero.so.1"),
              os.path.join(os.path.dirname(os.path.dirname(here)), "build", "src", "zero",
                           "libqccl_zero.so.1"),
              "libqccl_zero.so.1"]
    errs = []
    for p in cands:
        if os.path.sep in p and not os.path.exists(p):
            if env:
                raise OSError("QCCL_ZERO_LIBRARY=%s: no such file" % p)
            continue
        try:
            return ctypes.CDLL(p)
        except OSError as e:
            errs.append("%s: %s" % (p, e))
    raise OSError("libqccl_zero.so not found (set QCCL_ZERO_LIBRARY or build the checkout): "
                  + "; ".join(errs or cands))


class ZeroConfigStruct(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
        ("stage", ctypes.c_int), ("gradAccumSteps", ctypes.c_int), ("gradClip", ctypes.c_double),
        ("optimizer", ctypes.c_int), ("lr", ctypes.c_double), ("beta1", ctypes.c_double),
        ("beta2", ctypes.c_double), ("eps", ctypes.c_double), ("weightDecay", ctypes.c_double),
        ("momentum", ctypes.c_double), ("nesterov", ctypes.c_int),
        ("lambMaxCoeff", ctypes.c_double), ("lambMinCoeff", ctypes.c_double),
        ("fp16", ctypes.c_int), ("bf16", ctypes.c_int), ("lossScale", ctypes.c_double),
        ("initialScalePower", ctypes.c_int), ("lossScaleWindow", ctypes.c_int),
        ("hysteresis", ctypes.c_int), ("minLossScale", ctypes.c_double),
        ("reduceBucketSize", ctypes.c_size_t), ("allgatherBucketSize", ctypes.c_size_t),
        ("prefetchBucketSize", ctypes.c_size_t), ("persistenceThreshold", ctypes.c_size_t),
        ("maxLiveParameters", ctypes.c_size_t), ("overlapComm", ctypes.c_int),
        ("quantizedWeights", ctypes.c_int), ("quantizedGradients", ctypes.c_int),
        ("hpzPartitionSize", ctypes.c_int), ("qwzBits", ctypes.c_int), ("qwzBlock", ctypes.c_int),
        ("qgzIntraBits", ctypes.c_int), ("qgzInterBits", ctypes.c_int),
        ("qgzBlock", ctypes.c_int), ("rotate", ctypes.c_int), ("errorFeedback", ctypes.c_int),
        ("gradAccumDtype", ctypes.c_int),
    ]


class StepInfoStruct(ctypes.Structure):
    _fields_ = [
        ("boundary", ctypes.c_int), ("stepped", ctypes.c_int), ("overflow", ctypes.c_int),
        ("gradNorm", ctypes.c_double), ("lossScale", ctypes.c_double),
        ("step", ctypes.c_ulonglong), ("prefetched", ctypes.c_ulonglong),
        ("optimizerSeconds", ctypes.c_double),
    ]


_zl = None


def _zlib():
    global _zl
    if _zl is None:
        z = _load_zero()
        P, I, R = ctypes.c_void_p, ctypes.c_int, ctypes.c_int
        protos = {
            "qcclZeroConfigLoad": [ctypes.c_char_p, ctypes.POINTER(ZeroConfigStruct)],
            "qcclZeroCreate": [P, ctypes.POINTER(ZeroConfigStruct), ctypes.POINTER(P)],
            "qcclZeroRegister": [P, ctypes.c_char_p, ctypes.c_size_t, I, P, ctypes.POINTER(I)],
            "qcclZeroGather": [P, I, I, ctypes.POINTER(P)],
            "qcclZeroRelease": [P, I],
            "qcclZeroGradient": [P, I, P],
            "qcclZeroStep": [P, ctypes.POINTER(StepInfoStruct)],
            "qcclZeroGetLossScale": [P, ctypes.POINTER(ctypes.c_double)],
            "qcclZeroSetLearningRate": [P, ctypes.c_double],
            "qcclZeroGetMaster": [P, I, P],
            "qcclZeroSave": [P, ctypes.c_char_p],
            "qcclZeroLoad": [P, ctypes.c_char_p],
            "qcclZeroDestroy": [P],
        }
        for name, args in protos.items():
            f = getattr(z, name)
            f.argtypes = args
            f.restype = R
        z.qcclZeroGetLastError.argtypes = []
        z.qcclZeroGetLastError.restype = ctypes.c_char_p
        _zl = z
    return _zl


def _check(result, what):
    if result != 0:
        msg = _zlib().qcclZeroGetLastError()
        msg = msg.decode("utf-8", "replace") if msg else ""
        if not msg:
            msg = _lib.last_error(None) or _lib.lib.qcclGetErrorString(result).decode()
        raise QcclError(result, "%s: %s" % (what, msg))


_OPTIMIZERS = {"AdamW": 0, "Adam": 1, "SGD": 2}


def load_config(config):
    """A qcclZeroConfig_t from a DeepSpeed JSON file path or a dict."""
    cfg = ZeroConfigStruct()
    if isinstance(config, dict):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(config, f)
            path = f.name
        try:
            _check(_zlib().qcclZeroConfigLoad(path.encode(), ctypes.byref(cfg)), "config")
        finally:
            os.unlink(path)
    elif isinstance(config, (str, os.PathLike)):
        _check(_zlib().qcclZeroConfigLoad(os.fspath(config).encode(), ctypes.byref(cfg)),
               "config %s" % os.fspath(config))
    else:
        raise TypeError("config: a DeepSpeed JSON file path or a dict, got %s"
                        % type(config).__name__)
    return cfg


def _apply_optimizer(cfg, opt):
    """Takes a torch optimizer's type and first group's settings into cfg
    (the engine runs the optimizer itself, on the fp32 master shard)."""
    name = type(opt).__name__
    if name not in _OPTIMIZERS:
        raise ValueError("optimizer: %s is not supported (AdamW, Adam, SGD)" % name)
    g = opt.param_groups[0]
    cfg.optimizer = _OPTIMIZERS[name]
    cfg.lr = float(g["lr"])
    cfg.weightDecay = float(g.get("weight_decay", 0.0))
    if name in ("AdamW", "Adam"):
        cfg.beta1, cfg.beta2 = (float(b) for b in g["betas"])
        cfg.eps = float(g["eps"])
    else:
        cfg.momentum = float(g.get("momentum", 0.0))
        cfg.nesterov = 1 if g.get("nesterov") else 0


def _comm_for():
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized() and dist.get_backend() == "qccl":
        from . import torch as qtorch
        return qtorch.get_comm(), False
    from .comm import Comm
    return Comm.from_env(), True


class Engine:
    """The ZeRO engine over a torch model (see the module's text)."""

    def __init__(self, model, optimizer=None, config=None, comm=None):
        self.module = model
        self.cfg = load_config(config if config is not None else {})
        if optimizer is not None:
            _apply_optimizer(self.cfg, optimizer)
        if comm is None:
            comm, self._own_comm = _comm_for()
        else:
            self._own_comm = False
        self.comm = comm
        self.stage = self.cfg.stage if self.cfg.stage else 1
        z = ctypes.c_void_p()
        _check(_zlib().qcclZeroCreate(comm.handle, ctypes.byref(self.cfg), ctypes.byref(z)),
               "qcclZeroCreate")
        self._z = z.value
        self._params = []  # (name, param, id, shape)
        self._ids = {}
        self._shapes = {}
        for name, p in model.named_parameters():
            t = p.detach().contiguous()
            dt = from_torch_dtype(t.dtype, name)
            if dt not in (DataType.FLOAT32, DataType.BFLOAT16, DataType.FLOAT16):
                raise TypeError("parameter %s: %s (float32, bfloat16, float16)" % (name, t.dtype))
            pid = ctypes.c_int()
            _check(_zlib().qcclZeroRegister(self._z, name.encode(), t.numel(), int(dt),
                                            t.data_ptr(), ctypes.byref(pid)),
                   "register %s" % name)
            self._params.append((name, p, pid.value, p.shape))
            self._shapes[pid.value] = p.shape
            self._ids[id(p)] = pid.value
        self._given = set()
        self._hooks = []
        self.last_step = None
        for m in model.modules():
            own = [p for p in m.parameters(recurse=False)]
            if not own:
                continue
            self._hooks.append(m.register_forward_pre_hook(self._pre_forward))
            self._hooks.append(m.register_forward_hook(self._post_forward))
            self._hooks.append(m.register_full_backward_pre_hook(self._pre_backward))
        for _, p, pid, _ in self._params:
            if p.requires_grad:
                self._hooks.append(p.register_post_accumulate_grad_hook(self._grad_hook))
        if self.stage == 3:
            self._empty_all()
        else:
            self._fill_all()

    # ---- parameters in and out ----

    def _fill(self, p, phase):
        pid = self._ids[id(p)]
        ptr = ctypes.c_void_p()
        _check(_zlib().qcclZeroGather(self._z, pid, phase, ctypes.byref(ptr)), "gather")
        try:
            full = torch.empty(self._shapes[pid], dtype=p.dtype)
            ctypes.memmove(full.data_ptr(), ptr.value, full.numel() * full.element_size())
        finally:
            _check(_zlib().qcclZeroRelease(self._z, pid), "release")
        p.data = full

    def _empty(self, p):
        p.data = torch.empty(0, dtype=p.dtype)

    def _fill_all(self):
        for _, p, _, _ in self._params:
            self._fill(p, 0)

    def _empty_all(self):
        for _, p, _, _ in self._params:
            self._empty(p)

    def _pre_forward(self, module, args):
        if self.stage == 3:
            for p in module.parameters(recurse=False):
                self._fill(p, 0)

    def _post_forward(self, module, args, out):
        # stage 3 keeps a full copy only while the module computes; autograd
        # keeps the Parameter itself, whose data the backward pre-hook refills
        if self.stage == 3 and torch.is_grad_enabled():
            for p in module.parameters(recurse=False):
                self._empty(p)

    def _pre_backward(self, module, grad_output):
        if self.stage == 3:
            for p in module.parameters(recurse=False):
                self._fill(p, 1)

    def _grad_hook(self, p):
        pid = self._ids[id(p)]
        g = p.grad.detach().contiguous()
        _check(_zlib().qcclZeroGradient(self._z, pid, g.data_ptr()), "gradient")
        self._given.add(pid)
        p.grad = None
        if self.stage == 3:
            self._empty(p)

    # ---- DeepSpeed's shape ----

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    forward = __call__

    def loss_scale(self):
        s = ctypes.c_double()
        _check(_zlib().qcclZeroGetLossScale(self._z, ctypes.byref(s)), "loss scale")
        return s.value

    def backward(self, loss):
        scale = self.loss_scale()
        (loss * scale if scale != 1.0 else loss).backward()

    def step(self):
        """Gives a zero gradient to parameters backward did not reach, then
        qcclZeroStep. Returns its info as a dict (grad_norm, stepped, ...)."""
        for _, p, pid, shape in self._params:
            if pid not in self._given:
                z = torch.zeros(int(torch.Size(shape).numel()), dtype=p.dtype)
                _check(_zlib().qcclZeroGradient(self._z, pid, z.data_ptr()), "gradient")
        self._given.clear()
        info = StepInfoStruct()
        _check(_zlib().qcclZeroStep(self._z, ctypes.byref(info)), "step")
        self.last_step = {f: getattr(info, f) for f, _ in StepInfoStruct._fields_}
        if self.stage != 3:
            self._fill_all()  # the published parameters
        return self.last_step

    def get_global_grad_norm(self):
        return None if self.last_step is None else self.last_step["gradNorm"]

    def set_lr(self, lr):
        _check(_zlib().qcclZeroSetLearningRate(self._z, float(lr)), "set lr")

    def master_params(self):
        """{name: full fp32 master weights} (collective)."""
        out = {}
        for name, p, pid, shape in self._params:
            t = torch.empty(torch.Size(shape), dtype=torch.float32)
            _check(_zlib().qcclZeroGetMaster(self._z, pid, t.data_ptr()), "master")
            out[name] = t
        return out

    def save_checkpoint(self, save_dir):
        _check(_zlib().qcclZeroSave(self._z, os.fspath(save_dir).encode()), "save")

    def load_checkpoint(self, load_dir):
        _check(_zlib().qcclZeroLoad(self._z, os.fspath(load_dir).encode()), "load")
        if self.stage != 3:
            self._fill_all()

    def destroy(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if self._z is not None:
            z, self._z = self._z, None
            _check(_zlib().qcclZeroDestroy(z), "destroy")
        if self._own_comm:
            self.comm.destroy()


def initialize(model, optimizer=None, config=None, comm=None):
    """DeepSpeed's deepspeed.initialize in qccl's shape: returns the Engine.
    config: a DeepSpeed JSON file path or a dict (None: defaults); optimizer:
    a torch AdamW / Adam / SGD whose type and settings the engine takes (it
    runs the optimizer itself on the fp32 master shard)."""
    return Engine(model, optimizer, config, comm)
