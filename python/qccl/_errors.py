"""qccl.QcclError: a failed qccl call, with the library's message and code."""
import enum


class Result(enum.IntEnum):
    """qcclResult_t (NCCL's values, then qccl's own)."""

    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7
    TIMEOUT = 8


class QcclError(RuntimeError):
    """A qccl call failed. `result` is the qcclResult_t (a qccl.Result where
    known), `message` the text of qcclGetLastError for that failure."""

    def __init__(self, result, message):
        try:
            result = Result(result)
        except ValueError:
            pass
        self.result = result
        self.message = message
        name = result.name.lower() if isinstance(result, Result) else "result %d" % result
        super().__init__("%s (qccl %s)" % (message, name))
