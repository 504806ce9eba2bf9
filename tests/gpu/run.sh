#!/bin/sh
# tests/gpu/run.sh - on a machine with a GPU: build the CUDA codec kernels,
# run the GPU tests (CUDA against the scalar C definition, byte for byte) and
# the GPU benchmark (quantize / dequantize GB/s beside cudaMemcpy D2D), and
# print a short table. Meant to finish in under 5 minutes on one H200.
#
#   tests/gpu/run.sh [build-folder]        (CUDA_ROOT=/usr/local/cuda,
#                                           RUN_DIRECT=1: skip Meson)
#
# It builds with Meson when Meson, Ninja and the library's dependencies are
# there, and otherwise compiles just the codec, its tests and the benchmark
# directly with cc and nvcc (nothing else of qccl is needed for them).
set -u
cd "$(dirname "$0")/../.." || exit 1
CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
B=${1:-build-gpu}
NVCC="$CUDA_ROOT/bin/nvcc"
ARCH=${CUDA_ARCH:-sm_90}
start=$(date +%s)

if [ ! -x "$NVCC" ]; then
  echo "run.sh: no nvcc at $NVCC (set CUDA_ROOT)" >&2
  exit 1
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

build_meson() {
  [ "${RUN_DIRECT:-0}" = 1 ] && return 1
  command -v meson >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1 || return 1
  if [ -d "$B/meson-info" ]; then
    meson configure "$B" -Dcuda=enabled -Dcuda_root="$CUDA_ROOT" >/dev/null || return 1
  else
    meson setup "$B" -Dcuda=enabled -Dcuda_root="$CUDA_ROOT" --buildtype=release >/dev/null || return 1
  fi
  ninja -C "$B" tests/gpu/gpu_quant tests/gpu/qccl-gpu-quant-bench || return 1
  TEST="$B/tests/gpu/gpu_quant"
  BENCH="$B/tests/gpu/qccl-gpu-quant-bench"
}

build_direct() {
  D="$B-direct"
  mkdir -p "$D" || return 1
  DABS=$(cd "$D" && pwd)
  CC=${CC:-cc}
  FLAGS="-O2 -std=c11 -D_GNU_SOURCE -ffp-contract=off -Iinclude -Isrc -I$D"
  SRCS="src/core/err.c src/core/log.c src/core/env.c src/quant/quant_api.c
        src/quant/quant_chunk.c src/quant/quant_isa.c src/quant/quant_scalar.c"
  OBJS=""
  if [ "$(uname -m)" = x86_64 ]; then
    FLAGS="$FLAGS -DQUANT_X86=1"
    $CC $FLAGS -mavx2 -mf16c -c src/quant/quant_avx2.c -o "$D/quant_avx2.o" || return 1
    $CC $FLAGS -mavx512f -mavx512bw -mavx512vl -mf16c -c src/quant/quant_avx512.c \
      -o "$D/quant_avx512.o" || return 1
    OBJS="$D/quant_avx2.o $D/quant_avx512.o"
  fi
  for s in $SRCS; do
    o="$D/$(basename "$s" .c).o"
    $CC $FLAGS -c "$s" -o "$o" || return 1
    OBJS="$OBJS $o"
  done
  "$NVCC" -O3 -std=c++17 -arch="$ARCH" -fmad=false -prec-div=true -prec-sqrt=true -ftz=false \
    -shared -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -Xcompiler -ffp-contract=off \
    -Xlinker -soname=libqccl_quant_cuda.so -Iinclude -Isrc \
    src/quant/quant_cuda.cu -o "$D/libqccl_quant_cuda.so" || return 1
  for t in gpu_quant gpu_quant_bench; do
    # shellcheck disable=SC2086
    $CC $FLAGS "tests/gpu/$t.c" $OBJS -L"$D" -lqccl_quant_cuda -Wl,-rpath,"$DABS" \
      -lpthread -lm -o "$D/$t" || return 1
  done
  TEST="$D/gpu_quant"
  BENCH="$D/gpu_quant_bench"
}

echo "== build ($ARCH)"
if ! build_meson; then
  echo "run.sh: Meson build not possible here, building the codec directly"
  build_direct || { echo "run.sh: build failed" >&2; exit 1; }
fi
echo "== built in $(( $(date +%s) - start )) s"

echo "== GPU tests: CUDA kernels against the scalar definition"
timeout 240 "$TEST"
trc=$?
case $trc in
  0) result="PASS" ;;
  77) result="SKIP (no usable GPU)" ;;
  *) result="FAIL (exit $trc)" ;;
esac

echo "== GPU benchmark"
timeout 120 "$BENCH" --sizes "${BENCH_SIZES:-64M,1G}" --reps "${BENCH_REPS:-21}"
brc=$?

echo "== summary"
echo "gpu_quant: $result"
echo "benchmark: exit $brc"
echo "total: $(( $(date +%s) - start )) s"
[ $trc -eq 0 ] || [ $trc -eq 77 ]
