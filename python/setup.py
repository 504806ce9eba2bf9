"""Build hook: copies the libqccl.so that Meson built into the package, so
`pip install ./python` after `ninja -C build` gives a self-contained
install. The library is taken from QCCL_LIBRARY, else from
../build/src/libqccl.so.1 next to this folder (and libqccl_zero.so from
QCCL_ZERO_LIBRARY or src/zero/ beside it); without either the package
is installed alone and loads the system's libqccl.so.1 at import
(qccl/_lib.py tells the order)."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def built_library():
    env = os.environ.get("QCCL_LIBRARY")
    if env:
        return env if os.path.isfile(env) else None
    p = os.path.join(HERE, "..", "build", "src", "libqccl.so.1")
    return p if os.path.isfile(p) else None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = built_library()
        if lib is not None:
            dst = os.path.join(self.build_lib, "qccl", "libqccl.so")
            shutil.copyfile(os.path.realpath(lib), dst)
            print("qccl: bundled %s" % os.path.realpath(lib))
            # the ZeRO engine (qccl.zero), built beside it in src/zero/
            zero = os.environ.get("QCCL_ZERO_LIBRARY") or os.path.join(
                os.path.dirname(lib), "zero", "libqccl_zero.so.1")
            if os.path.isfile(zero):
                shutil.copyfile(os.path.realpath(zero),
                                os.path.join(self.build_lib, "qccl", "libqccl_zero.so"))
                print("qccl: bundled %s" % os.path.realpath(zero))
        else:
            print("qccl: no built libqccl.so found (QCCL_LIBRARY, ../build/src): "
                  "the package will load the system's libqccl.so.1")


setup(cmdclass={"build_py": BuildPyWithLibrary})
