/*
 * fake_cudart.c - a stand-in CUDA runtime for nccl_devptr (loaded by the
 * drop-in through QCCL_NCCL_CUDART): one device (number 3), device memory
 * wherever the test says so (fake_cuda_mark_device), streams that
 * synchronize (counted) unless they are FAKE_BAD_STREAM. It lets the drop-in's
 * device checks run on a machine without a GPU. Only what the drop-in calls
 * is here, with the CUDA runtime's signatures (ints for enums).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FAKE_BAD_STREAM ((void*)0xbad)

__attribute__((visibility("default"))) void fake_cuda_mark_device(const void* p, size_t n);
__attribute__((visibility("default"))) int fake_cuda_sync_count(void);
__attribute__((visibility("default"))) int cudaGetDeviceCount(int* count);
__attribute__((visibility("default"))) int cudaGetDevice(int* device);
__attribute__((visibility("default"))) int cudaPointerGetAttributes(void* attributes,
                                                                    const void* ptr);
__attribute__((visibility("default"))) int cudaStreamSynchronize(void* stream);
__attribute__((visibility("default"))) int cudaGetLastError(void);
__attribute__((visibility("default"))) const char* cudaGetErrorString(int error);

static uintptr_t dev_lo, dev_hi;
static int syncs;

void fake_cuda_mark_device(const void* p, size_t n) {
  dev_lo = (uintptr_t)p;
  dev_hi = (uintptr_t)p + n;
}

int fake_cuda_sync_count(void) {
  return syncs;
}

int cudaGetDeviceCount(int* count) {
  *count = 1;
  return 0;
}

int cudaGetDevice(int* device) {
  *device = 3;
  return 0;
}

int cudaPointerGetAttributes(void* attributes, const void* ptr) {
  uintptr_t a = (uintptr_t)ptr;
  int type = a >= dev_lo && a < dev_hi ? 2 /* device */ : 0 /* unregistered host */;
  memcpy(attributes, &type, sizeof type);
  return 0;
}

int cudaStreamSynchronize(void* stream) {
  if (stream == FAKE_BAD_STREAM) return 400; /* cudaErrorInvalidResourceHandle */
  syncs++;
  return 0;
}

int cudaGetLastError(void) {
  return 0;
}

const char* cudaGetErrorString(int error) {
  return error == 400 ? "invalid resource handle" : "no error";
}
