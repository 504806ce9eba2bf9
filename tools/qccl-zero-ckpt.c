/*
 * qccl-zero-ckpt - the command line over the checkpoint tools of
 * qccl_zero.h:
 *   qccl-zero-ckpt list DIR
 *   qccl-zero-ckpt verify DIR
 *   qccl-zero-ckpt consolidate DIR OUT.safetensors
 * DIR is a directory given to qcclZeroSave (its latest checkpoint) or one
 * checkpoint in it. Exit status 0 on success, 1 on an error (printed with
 * the file it concerns), 2 on a usage error.
 */
#include <stdio.h>
#include <string.h>

#include "qccl_zero.h"

static int usage(void) {
  fprintf(stderr,
          "usage: qccl-zero-ckpt list DIR\n"
          "       qccl-zero-ckpt verify DIR\n"
          "       qccl-zero-ckpt consolidate DIR OUT.safetensors\n");
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  qcclResult_t r;
  if (strcmp(argv[1], "list") == 0 && argc == 3) {
    r = qcclZeroCheckpointList(argv[2], stdout);
  } else if (strcmp(argv[1], "verify") == 0 && argc == 3) {
    r = qcclZeroCheckpointVerify(argv[2]);
    if (r == qcclSuccess) printf("%s: ok\n", argv[2]);
  } else if (strcmp(argv[1], "consolidate") == 0 && argc == 4) {
    r = qcclZeroCheckpointConsolidate(argv[2], argv[3]);
    if (r == qcclSuccess) printf("%s: written\n", argv[3]);
  } else {
    return usage();
  }
  if (r != qcclSuccess) {
    fprintf(stderr, "qccl-zero-ckpt: %s\n", qcclZeroGetLastError());
    return 1;
  }
  return 0;
}
