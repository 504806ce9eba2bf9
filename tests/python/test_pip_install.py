"""`pip install ./python` gives a self-contained package: installed into a
fresh folder (--target), with the library of this build copied in, it
imports and runs a one-rank communicator from anywhere, with neither the
checkout nor QCCL_LIBRARY in sight. One process."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_pip_install_target(tmp_path):
    target = tmp_path / "site"
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                        "--no-deps", "--disable-pip-version-check", "--target", str(target),
                        os.path.join(ROOT, "python")], env=env, capture_output=True, text=True,
                       cwd=str(tmp_path), timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (target / "qccl" / "libqccl.so").exists()
    assert (target / "qccl" / "libqccl_zero.so").exists()
    code = ("import numpy as np, qccl; c = qccl.Comm.init_rank(1, qccl.get_unique_id(), 0);"
            "x = np.arange(4, dtype=np.float32); c.all_reduce(x); c.destroy();"
            "import qccl.zero; qccl.zero._zlib();"
            "print(qccl.library_path); print(qccl.library_version())")
    env.pop("QCCL_LIBRARY", None)
    env.pop("QCCL_ZERO_LIBRARY", None)
    env["PYTHONPATH"] = str(target)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=str(tmp_path), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.split()
    assert lines[0] == str(target / "qccl" / "libqccl.so"), lines
    assert int(lines[1]) >= 100
