/*
 * zero_ckpt_tool.c - the local checkpoint tools behind qccl-zero-ckpt:
 * list (layout and state from the manifest), verify (every shard file's
 * size and checksum) and consolidate (the full fp32 master weights of
 * every parameter, read across the shard files, into one safetensors file:
 * an 8-byte little-endian header length, a JSON header of name -> {dtype
 * "F32", shape, data_offsets}, padded with spaces to a multiple of 8, then
 * the raw tensors in manifest order).
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "zero.h"
#include "zero_ckpt.h"

qcclResult_t qcclZeroCheckpointList(const char* dir, FILE* out) {
  zero_clear_error();
  if (dir == NULL || out == NULL)
    return zero_fail(qcclInvalidArgument, "qcclZeroCheckpointList: %s is NULL",
                     dir == NULL ? "dir" : "out");
  zero_manifest_t m;
  ZERO_CHECK(zero_manifest_read(dir, &m));
  size_t total = 0;
  for (int i = 0; i < m.nparams; i++) total += m.params[i].count;
  fprintf(out, "checkpoint %s\n  step %llu, world size %d, stage %d, optimizer %s, loss scale %g\n",
          m.dir, m.step, m.world, m.stage, m.optimizer, m.scale);
  fprintf(out, "  %d parameters (%zu elements) in %d units\n", m.nparams, total, m.nunits);
  for (int i = 0; i < m.nparams; i++)
    fprintf(out, "  %-40s %12zu %-4s unit %d offset %zu\n", m.params[i].name, m.params[i].count,
            zero_dtype_name(m.params[i].dtype), m.params[i].unit, m.params[i].offset);
  for (int r = 0; r < m.world; r++)
    fprintf(out, "  rank%d.shard %llu bytes fnv1a64 %016llx\n", r,
            (unsigned long long)m.shards[r].bytes, (unsigned long long)m.shards[r].hash);
  zero_manifest_free(&m);
  return qcclSuccess;
}

qcclResult_t qcclZeroCheckpointVerify(const char* dir) {
  zero_clear_error();
  if (dir == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroCheckpointVerify: dir is NULL");
  zero_manifest_t m;
  ZERO_CHECK(zero_manifest_read(dir, &m));
  qcclResult_t res = qcclSuccess;
  for (int r = 0; r < m.world && res == qcclSuccess; r++) res = zero_shard_verify(&m, r);
  zero_manifest_free(&m);
  return res;
}

qcclResult_t qcclZeroCheckpointConsolidate(const char* dir, const char* path) {
  zero_clear_error();
  if (dir == NULL || path == NULL)
    return zero_fail(qcclInvalidArgument, "qcclZeroCheckpointConsolidate: %s is NULL",
                     dir == NULL ? "dir" : "safetensorsPath");
  zero_manifest_t m;
  ZERO_CHECK(zero_manifest_read(dir, &m));
  qcclResult_t res = qcclSuccess;
  for (int r = 0; r < m.world && res == qcclSuccess; r++) res = zero_shard_verify(&m, r);
  json_t* head = json_object();
  json_object_set_new(head, "__metadata__",
                      json_pack("{s:s, s:s}", "format", "pt", "producer", "qccl-zero-ckpt"));
  size_t off = 0;
  for (int i = 0; i < m.nparams && res == qcclSuccess; i++) {
    size_t bytes = m.params[i].count * 4;
    json_object_set_new(
        head, m.params[i].name,
        json_pack("{s:s, s:[I], s:[I,I]}", "dtype", "F32", "shape", (json_int_t)m.params[i].count,
                  "data_offsets", (json_int_t)off, (json_int_t)(off + bytes)));
    off += bytes;
  }
  char* text = json_dumps(head, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(head);
  FILE** files = calloc((size_t)m.world, sizeof(FILE*));
  FILE* f = NULL;
  if (res == qcclSuccess && (text == NULL || files == NULL))
    res = zero_fail(qcclSystemError, "out of memory");
  if (res == qcclSuccess) {
    f = fopen(path, "wb");
    if (f == NULL) res = zero_fail(qcclSystemError, "%s: cannot create: %s", path, strerror(errno));
  }
  if (res == qcclSuccess) {
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    uint64_t hl = padded;
    int ok = fwrite(&hl, 8, 1, f) == 1 && fwrite(text, 1, len, f) == len;
    for (size_t i = len; i < padded && ok; i++) ok = fputc(' ', f) != EOF;
    float* buf = NULL;
    for (int i = 0; i < m.nparams && ok && res == qcclSuccess; i++) {
      buf = realloc(buf, m.params[i].count * 4);
      if (buf == NULL) {
        res = zero_fail(qcclSystemError, "out of memory");
        break;
      }
      res = zero_param_read(&m, files, i, 0, 0, m.params[i].count, buf);
      if (res == qcclSuccess) ok = fwrite(buf, 4, m.params[i].count, f) == m.params[i].count;
    }
    free(buf);
    if (fclose(f) != 0) ok = 0;
    if (res == qcclSuccess && !ok)
      res = zero_fail(qcclSystemError, "%s: write failed: %s", path, strerror(errno));
    if (res != qcclSuccess) remove(path);
  }
  for (int r = 0; files != NULL && r < m.world; r++)
    if (files[r] != NULL) fclose(files[r]);
  free(files);
  free(text);
  zero_manifest_free(&m);
  return res;
}
