/*
 * nccl_cuda.c - the CUDA runtime as the drop-in sees it: loaded at run time
 * (dlopen), never linked, so libnccl.so.2 runs where there is no CUDA.
 *
 * On the first call that needs it, the runtime is looked for in this order:
 * QCCL_NCCL_CUDART (a path, or "none" to look for nothing; a path that does
 * not load is an error of every later call naming the variable), the
 * runtime the program already has (dlsym RTLD_DEFAULT), then
 * libcudart.so.13, .12 and libcudart.so. With no runtime, with a runtime
 * that reports no device (no driver: cudaGetDeviceCount fails), every
 * pointer is host memory and streams need no wait. Otherwise:
 *   - a buffer is device memory when cudaPointerGetAttributes says
 *     cudaMemoryTypeDevice (host, pinned and managed memory are host
 *     readable; a failing query is taken as host memory, the state of
 *     runtimes before CUDA 11 for unregistered memory, and its error is
 *     cleared with cudaGetLastError);
 *   - the stream is synchronized before the call runs;
 *   - the current device is what ncclCommCuDevice reports.
 * Only the first field of cudaPointerAttributes (type) is read; the struct
 * is given ample room for the runtime's version of it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_shim.h"

#define CUDA_MEMORY_TYPE_DEVICE 2 /* cudaMemoryTypeDevice */

typedef int (*cuda_int_fn)(int*);
typedef int (*cuda_attr_fn)(void* attributes, const void* ptr);
typedef int (*cuda_sync_fn)(cudaStream_t stream);
typedef int (*cuda_void_fn)(void);
typedef const char* (*cuda_str_fn)(int error);

static struct {
  int usable;       /* a runtime with at least one device */
  ncclResult_t err; /* QCCL_NCCL_CUDART did not load */
  char err_msg[512];
  cuda_int_fn get_device_count, get_device;
  cuda_attr_fn pointer_attributes;
  cuda_sync_fn stream_synchronize;
  cuda_void_fn get_last_error; /* optional */
  cuda_str_fn error_string;    /* optional */
} cuda_rt;
static pthread_once_t cuda_rt_once = PTHREAD_ONCE_INIT;

static int cuda_resolve(void* handle) {
  cuda_rt.get_device_count = (cuda_int_fn)dlsym(handle, "cudaGetDeviceCount");
  cuda_rt.get_device = (cuda_int_fn)dlsym(handle, "cudaGetDevice");
  cuda_rt.pointer_attributes = (cuda_attr_fn)dlsym(handle, "cudaPointerGetAttributes");
  cuda_rt.stream_synchronize = (cuda_sync_fn)dlsym(handle, "cudaStreamSynchronize");
  cuda_rt.get_last_error = (cuda_void_fn)dlsym(handle, "cudaGetLastError");
  cuda_rt.error_string = (cuda_str_fn)dlsym(handle, "cudaGetErrorString");
  return cuda_rt.get_device_count && cuda_rt.get_device && cuda_rt.pointer_attributes &&
         cuda_rt.stream_synchronize;
}

static void cuda_rt_load(void) {
  const char* env = getenv("QCCL_NCCL_CUDART");
  shim_log(SHIM_LOG_INFO, "QCCL_NCCL_CUDART = %s", env ? env : "(unset)");
  void* handle = NULL;
  const char* source = NULL;
  if (env != NULL && strcmp(env, "none") == 0) {
    shim_log(SHIM_LOG_INFO, "CUDA runtime: not looked for: buffers are host memory");
    return;
  }
  if (env != NULL && env[0] != '\0') {
    handle = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL || !cuda_resolve(handle)) {
      const char* why = handle == NULL ? dlerror() : "a CUDA runtime function is missing";
      snprintf(cuda_rt.err_msg, sizeof cuda_rt.err_msg, "QCCL_NCCL_CUDART = %s: %s", env,
               why ? why : "cannot load");
      cuda_rt.err = ncclInvalidArgument;
      return;
    }
    source = env;
  } else if (dlsym(RTLD_DEFAULT, "cudaPointerGetAttributes") != NULL &&
             cuda_resolve(RTLD_DEFAULT)) {
    source = "the program's";
  } else {
    static const char* const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && source == NULL; i++) {
      handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
      if (handle != NULL && cuda_resolve(handle)) source = names[i];
    }
  }
  if (source == NULL) {
    shim_log(SHIM_LOG_INFO, "CUDA runtime: none found: buffers are host memory");
    return;
  }
  int n = 0;
  int e = cuda_rt.get_device_count(&n);
  if (e != 0 || n <= 0) {
    if (cuda_rt.get_last_error) cuda_rt.get_last_error();
    shim_log(SHIM_LOG_INFO,
             "CUDA runtime %s: no device (cudaGetDeviceCount: error %d, %d devices): buffers are "
             "host memory",
             source, e, n);
    return;
  }
  cuda_rt.usable = 1;
  shim_log(SHIM_LOG_INFO,
           "CUDA runtime %s: %d devices: device buffers are refused, streams are synchronized "
           "before each call",
           source, n);
}

static const char* cuda_error_text(int e) {
  const char* s = cuda_rt.error_string ? cuda_rt.error_string(e) : NULL;
  return s ? s : "CUDA error";
}

ncclResult_t shim_cuda_host_buffer(const char* call, const char* arg, const void* ptr) {
  if (ptr == NULL) return ncclSuccess;
  pthread_once(&cuda_rt_once, cuda_rt_load);
  if (cuda_rt.err != ncclSuccess) return shim_fail(cuda_rt.err, "%s: %s", call, cuda_rt.err_msg);
  if (!cuda_rt.usable) return ncclSuccess;
  union {
    int type;
    char room[256];
  } attributes;
  memset(&attributes, 0, sizeof attributes);
  int e = cuda_rt.pointer_attributes(&attributes, ptr);
  if (e != 0) {
    if (cuda_rt.get_last_error) cuda_rt.get_last_error();
    return ncclSuccess;
  }
  if (attributes.type == CUDA_MEMORY_TYPE_DEVICE)
    return shim_fail(ncclInvalidArgument,
                     "%s: %s %p is CUDA device memory: qccl's libnccl takes host buffers only "
                     "(host, pinned or managed memory)",
                     call, arg, ptr);
  return ncclSuccess;
}

ncclResult_t shim_cuda_stream(const char* call, cudaStream_t stream) {
  pthread_once(&cuda_rt_once, cuda_rt_load);
  if (cuda_rt.err != ncclSuccess) return shim_fail(cuda_rt.err, "%s: %s", call, cuda_rt.err_msg);
  if (!cuda_rt.usable) return ncclSuccess;
  int e = cuda_rt.stream_synchronize(stream);
  if (e != 0)
    return shim_fail(ncclUnhandledCudaError, "%s: stream %p: cudaStreamSynchronize: %s (error %d)",
                     call, (void*)stream, cuda_error_text(e), e);
  return ncclSuccess;
}

int shim_cuda_device(void) {
  pthread_once(&cuda_rt_once, cuda_rt_load);
  int d = 0;
  if (cuda_rt.usable && cuda_rt.get_device(&d) != 0) d = 0;
  return d;
}
