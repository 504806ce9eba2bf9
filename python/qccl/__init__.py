"""qccl for Python: communicators, collectives on NumPy arrays and torch CPU
tensors, the block-quantization codec, the ZeRO++ collectives, policies and
traffic counters, over the shared library libqccl.so (ctypes).

    import qccl
    comm = qccl.Comm.from_env()               # under torchrun, qcclrun, mpirun, srun
    x = numpy.ones(1024, dtype=numpy.float32)
    comm.all_reduce(x, op="sum")              # in place
    y = comm.all_gather_q(x, spec=qccl.QuantSpec(bits=8))
    print(comm.stats()["all_gather_q"])

`import qccl.torch` registers the torch.distributed backend "qccl".
Every failure raises qccl.QcclError (message and result code).
"""
from ._errors import QcclError, Result
from ._types import DataType, RedOp, StatColl
from ._lib import path as library_path, version as _version
from .codec import (QuantSpec, ReduceScatterQConfig, quant_size, quantize, dequantize,
                    error_bound)
from .comm import Comm, Secondary, NodeInfo, UniqueId, get_unique_id, group_start, group_end
from .stream import Stream, Event

__version__ = "0.1.0"


def library_version():
    """QCCL_VERSION_CODE of the loaded libqccl (major*10000 + minor*100 + patch)."""
    return _version()


group = Comm.group

__all__ = [
    "QcclError", "Result", "DataType", "RedOp", "StatColl", "QuantSpec",
    "ReduceScatterQConfig", "quant_size", "quantize", "dequantize", "error_bound", "Comm",
    "Secondary", "NodeInfo", "UniqueId", "get_unique_id", "group", "group_start", "group_end",
    "Stream", "Event", "library_path", "library_version",
]
