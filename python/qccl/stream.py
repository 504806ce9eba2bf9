"""Host streams and events (qcclStreamCreate, qcclEvent*).

A call given stream=s is checked at once, then queued on s and run on the
stream's own thread, in order; s.synchronize() or an event recorded after
it reports completion and the first error. The caller must keep the
buffers of a queued call alive and untouched until it has completed.
"""
import ctypes

from . import _lib


def available():
    """True if the loaded libqccl implements host streams."""
    return _lib.has("qcclStreamCreate") and _lib.has("qcclEventCreate")


class Stream:
    """A host stream. Use as a context manager or call destroy()."""

    def __init__(self):
        h = ctypes.c_void_p()
        _lib.check(_lib.fn("qcclStreamCreate")(ctypes.byref(h)), what="qcclStreamCreate")
        self._as_parameter_ = h.value
        self.handle = h.value

    def synchronize(self):
        """Waits for every call queued so far; raises the stream's first error."""
        _lib.check(_lib.fn("qcclStreamSynchronize")(self.handle))

    def query(self):
        """True when everything queued has completed (raises its first error)."""
        r = _lib.fn("qcclStreamQuery")(self.handle)
        if r == 7:  # qcclInProgress
            return False
        _lib.check(r)
        return True

    def wait_event(self, event):
        _lib.check(_lib.fn("qcclStreamWaitEvent")(self.handle, event.handle))

    def destroy(self):
        if self.handle is not None:
            h, self.handle = self.handle, None
            _lib.check(_lib.fn("qcclStreamDestroy")(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()


class Event:
    """An event: complete once the calls queued before its record point are."""

    def __init__(self):
        h = ctypes.c_void_p()
        _lib.check(_lib.fn("qcclEventCreate")(ctypes.byref(h)), what="qcclEventCreate")
        self.handle = h.value

    def record(self, stream):
        _lib.check(_lib.fn("qcclEventRecord")(self.handle, stream.handle))

    def query(self):
        """False while in progress; True when complete; raises its error."""
        r = _lib.fn("qcclEventQuery")(self.handle)
        if r == 7:
            return False
        _lib.check(r)
        return True

    def synchronize(self):
        _lib.check(_lib.fn("qcclEventSynchronize")(self.handle))

    def destroy(self):
        if self.handle is not None:
            h, self.handle = self.handle, None
            _lib.fn("qcclEventDestroy")(h)

    def __del__(self):
        try:
            self.destroy()
        except Exception:
            pass


def handle_of(stream):
    if stream is None:
        return None
    if isinstance(stream, Stream):
        if stream.handle is None:
            raise ValueError("stream: destroyed")
        return stream.handle
    raise TypeError("stream: expected a qccl.Stream or None, got %s" % type(stream).__name__)
