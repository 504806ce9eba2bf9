/*
 * zero_ckpt.c - qcclZeroSave and qcclZeroLoad (format: zero_ckpt.h).
 *
 * Save: rank 0 draws a nonce (broadcast) that names the new checkpoint
 * directory; every rank writes its shard file (temporary name, fsync,
 * rename); one all-gather brings every rank's status, size and checksum;
 * only if all succeeded rank 0 writes the manifest and then replaces
 * `latest` (temporary file, fsync, rename, fsync of the directory); a
 * broadcast of rank 0's result ends the call on every rank. A rank that
 * dies during the save leaves `latest` naming the previous checkpoint.
 *
 * Load: every rank reads the manifest, matches the registered parameters
 * by name, count and dtype, verifies the size and checksum of every shard
 * file it needs, then reads its new shards element range by element range
 * from the old ranks' files (resharding: any world size, any stage). One
 * all-reduce agrees on success before anything is changed, so a bad
 * checkpoint fails on every rank (naming the file) and leaves the engine
 * as it was. The step counter and loss scaler come from the manifest; the
 * hpZ generation advances.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zero.h"
#include "zero_ckpt.h"

static int zero_fsync_path(const char* path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

static void zero_put32(unsigned char* p, uint32_t v) {
  memcpy(p, &v, 4); /* little endian hosts only (x86-64, aarch64) */
}

/* Writes this rank's shard file; returns its size and checksum. */
static qcclResult_t zero_write_shard(qcclZero_t z, const char* ckdir, uint64_t* bytes,
                                     uint64_t* hash) {
  char path[ZERO_CKPT_PATH + 64], tmp[ZERO_CKPT_PATH + 80];
  snprintf(path, sizeof path, "%s/rank%d.shard", ckdir, z->rank);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "wb");
  if (f == NULL) return zero_fail(qcclSystemError, "%s: cannot create: %s", tmp, strerror(errno));
  uint64_t payload = 0;
  for (int k = 0; k < z->nunits; k++) payload += 3 * 4 * (uint64_t)z->units[k].mine;
  unsigned char head[ZERO_CKPT_HEADER] = {0};
  memcpy(head, ZERO_CKPT_MAGIC, 8);
  zero_put32(head + 8, 1);
  zero_put32(head + 12, (uint32_t)z->rank);
  zero_put32(head + 16, (uint32_t)z->nranks);
  zero_put32(head + 20, (uint32_t)z->nunits);
  memcpy(head + 24, &payload, 8);
  uint64_t step = z->step;
  memcpy(head + 32, &step, 8);
  uint64_t h = zero_fnv(ZERO_FNV_INIT, head, sizeof head);
  int ok = fwrite(head, 1, sizeof head, f) == sizeof head;
  const char* kill_rank = getenv("QCCL_ZERO_TEST_KILL_IN_SAVE");
  int kill_me = kill_rank != NULL && atoi(kill_rank) == z->rank;
  for (int k = 0; k < z->nunits && ok; k++) {
    zero_unit_t* u = &z->units[k];
    const float* arrays[3] = {u->master, u->m, u->v};
    for (int a = 0; a < 3 && ok; a++) {
      ok = fwrite(arrays[a], 4, u->mine, f) == u->mine;
      h = zero_fnv(h, arrays[a], u->mine * 4);
    }
    if (kill_me && k == z->nunits / 2) {
      fflush(f); /* a test of atomicity: die half-way through the shard */
      raise(SIGKILL);
    }
  }
  ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (fclose(f) != 0) ok = 0;
  if (!ok) {
    unlink(tmp);
    return zero_fail(qcclSystemError, "%s: write failed: %s", tmp, strerror(errno));
  }
  if (rename(tmp, path) != 0)
    return zero_fail(qcclSystemError, "%s: rename failed: %s", path, strerror(errno));
  *bytes = ZERO_CKPT_HEADER + payload;
  *hash = h;
  return qcclSuccess;
}

static const char* zero_opt_name(qcclZeroOptimizer_t o) {
  switch (o) {
    case qcclZeroAdamW:
      return "AdamW";
    case qcclZeroAdam:
      return "Adam";
    case qcclZeroSGD:
      return "SGD";
    case qcclZeroLamb:
      return "Lamb";
  }
  return "?";
}

/* Rank 0: the manifest, then `latest`. */
static qcclResult_t zero_write_manifest(qcclZero_t z, const char* dir, const char* tag,
                                        const uint64_t* info) {
  json_t* units = json_array();
  for (int k = 0; k < z->nunits; k++)
    json_array_append_new(units, json_pack("{s:I, s:I}", "n", (json_int_t)z->units[k].n, "s",
                                           (json_int_t)z->units[k].s));
  json_t* params = json_array();
  for (int i = 0; i < z->nparams; i++) {
    zero_param_t* p = &z->params[i];
    json_array_append_new(
        params,
        json_pack("{s:s, s:I, s:[I], s:s, s:i, s:I}", "name", p->name, "count",
                  (json_int_t)p->count, "shape", (json_int_t)p->count, "dtype",
                  zero_dtype_name(p->dtype), "unit", p->unit, "offset", (json_int_t)p->offset));
  }
  json_t* shards = json_array();
  for (int r = 0; r < z->nranks; r++) {
    char file[64], hex[32];
    snprintf(file, sizeof file, "rank%d.shard", r);
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)info[3 * r + 2]);
    json_array_append_new(shards, json_pack("{s:s, s:I, s:s}", "file", file, "bytes",
                                            (json_int_t)info[3 * r + 1], "fnv1a64", hex));
  }
  const qcclZeroConfig_t* c = &z->cfg;
  json_t* root = json_pack(
      "{s:s, s:i, s:i, s:i, s:I, s:I, s:{s:f, s:i, s:I}, s:{s:s, s:f, s:[f,f], s:f, s:f, s:f, "
      "s:b, s:f, s:f}, s:o, s:o, s:o}",
      "format", "qccl-zero-checkpoint", "version", 1, "world_size", z->nranks, "stage", c->stage,
      "step", (json_int_t)z->step, "generation", (json_int_t)z->generation, "loss_scaler", "scale",
      z->scale, "hysteresis_left", z->hyst_left, "good_steps", (json_int_t)z->good_steps,
      "optimizer", "type", zero_opt_name(c->optimizer), "lr", c->lr, "betas", c->beta1, c->beta2,
      "eps", c->eps, "weight_decay", c->weightDecay, "momentum", c->momentum, "nesterov",
      c->nesterov, "max_coeff", c->lambMaxCoeff, "min_coeff", c->lambMinCoeff, "units", units,
      "params", params, "shards", shards);
  if (root == NULL) return zero_fail(qcclInternalError, "manifest: cannot build the JSON");
  char* text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (text == NULL) return zero_fail(qcclSystemError, "manifest: out of memory");
  size_t len = strlen(text);
  uint64_t h = zero_fnv(ZERO_FNV_INIT, text, len);
  char path[ZERO_CKPT_PATH + 64], tmp[ZERO_CKPT_PATH + 80];
  snprintf(path, sizeof path, "%s/%s/manifest.json", dir, tag);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "wb");
  int ok = f != NULL && fwrite(text, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (f != NULL && fclose(f) != 0) ok = 0;
  free(text);
  if (!ok || rename(tmp, path) != 0)
    return zero_fail(qcclSystemError, "%s: cannot write: %s", path, strerror(errno));
  snprintf(path, sizeof path, "%s/%s", dir, tag);
  zero_fsync_path(path);
  snprintf(path, sizeof path, "%s/latest", dir);
  snprintf(tmp, sizeof tmp, "%s/latest.tmp", dir);
  f = fopen(tmp, "wb");
  ok = f != NULL && fprintf(f, "%s %016llx\n", tag, (unsigned long long)h) > 0 && fflush(f) == 0 &&
       fsync(fileno(f)) == 0;
  if (f != NULL && fclose(f) != 0) ok = 0;
  if (!ok || rename(tmp, path) != 0)
    return zero_fail(qcclSystemError, "%s: cannot write: %s", path, strerror(errno));
  zero_fsync_path(dir);
  return qcclSuccess;
}

qcclResult_t qcclZeroSave(qcclZero_t z, const char* dir) {
  if (z == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroSave: zero is NULL");
  if (dir == NULL || dir[0] == '\0' || strlen(dir) > ZERO_CKPT_PATH - 128)
    return zero_fail(qcclInvalidArgument, "qcclZeroSave: dir is NULL, empty or too long");
  ZERO_CHECK(zero_layout(z));
  if (z->micro != 0)
    return zero_fail(qcclInvalidUsage,
                     "qcclZeroSave: called inside an accumulation window (%d of %d micro-steps)",
                     z->micro, z->cfg.gradAccumSteps);
  uint64_t nonce = 0;
  if (z->rank == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    nonce = ((uint64_t)ts.tv_nsec * 2654435761u) ^ ((uint64_t)getpid() << 20) ^ (uint64_t)ts.tv_sec;
  }
  ZERO_QCCL(z, qcclBroadcast(&nonce, &nonce, 1, qcclUint64, 0, z->comm, NULL));
  char tag[64], ckdir[ZERO_CKPT_PATH];
  snprintf(tag, sizeof tag, "ckpt-%08llu-%08llx", (unsigned long long)z->step,
           (unsigned long long)(nonce & 0xffffffffu));
  snprintf(ckdir, sizeof ckdir, "%s/%s", dir, tag);
  /* local part: the directory and this rank's file */
  uint64_t mine[3] = {0, 0, 0};
  qcclResult_t res = qcclSuccess;
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    res = zero_fail(qcclSystemError, "%s: cannot create: %s", dir, strerror(errno));
  else if (mkdir(ckdir, 0755) != 0 && errno != EEXIST)
    res = zero_fail(qcclSystemError, "%s: cannot create: %s", ckdir, strerror(errno));
  else
    res = zero_write_shard(z, ckdir, &mine[1], &mine[2]);
  mine[0] = (uint64_t)res;
  uint64_t* info = malloc(sizeof(uint64_t) * 3 * (size_t)z->nranks);
  if (info == NULL) return zero_fail(qcclSystemError, "qcclZeroSave: out of memory");
  qcclResult_t cres = qcclAllGather(mine, info, 3, qcclUint64, z->comm, NULL);
  if (cres != qcclSuccess) {
    free(info);
    return zero_fail_call(cres, z->comm, "qcclZeroSave: status all-gather");
  }
  int bad = -1;
  for (int r = 0; r < z->nranks && bad < 0; r++)
    if (info[3 * r] != qcclSuccess) bad = r;
  if (bad >= 0) {
    qcclResult_t code = (qcclResult_t)info[3 * bad];
    free(info);
    if (bad == z->rank) return res;
    return zero_fail(code,
                     "qcclZeroSave: rank %d could not write %s/rank%d.shard; %s/latest is "
                     "unchanged",
                     bad, ckdir, bad, dir);
  }
  uint64_t status = qcclSuccess;
  if (z->rank == 0) status = (uint64_t)zero_write_manifest(z, dir, tag, info);
  free(info);
  ZERO_QCCL(z, qcclBroadcast(&status, &status, 1, qcclUint64, 0, z->comm, NULL));
  if (status != qcclSuccess && z->rank != 0)
    return zero_fail((qcclResult_t)status,
                     "qcclZeroSave: rank 0 could not write the manifest of %s", ckdir);
  return (qcclResult_t)status;
}

/* The local part of a load: into fresh shard buffers (nothing of z changes). */
static qcclResult_t zero_load_local(qcclZero_t z, const zero_manifest_t* m, float** nm,
                                    int* badfile) {
  int* map = malloc(sizeof(int) * (size_t)z->nparams + 1);
  if (map == NULL) return zero_fail(qcclSystemError, "qcclZeroLoad: out of memory");
  char mpath[ZERO_CKPT_PATH + 64];
  snprintf(mpath, sizeof mpath, "%s/manifest.json", m->dir);
  qcclResult_t res = qcclSuccess;
  if (m->nparams != z->nparams)
    res = zero_fail(qcclInvalidUsage, "%s: %d parameters, %d registered", mpath, m->nparams,
                    z->nparams);
  for (int i = 0; i < z->nparams && res == qcclSuccess; i++) {
    zero_param_t* p = &z->params[i];
    map[i] = -1;
    for (int j = 0; j < m->nparams; j++)
      if (strcmp(m->params[j].name, p->name) == 0) map[i] = j;
    if (map[i] < 0)
      res = zero_fail(qcclInvalidUsage, "%s: no parameter '%s'", mpath, p->name);
    else if (m->params[map[i]].count != p->count || m->params[map[i]].dtype != p->dtype)
      res =
          zero_fail(qcclInvalidUsage, "%s: '%s' has %zu elements of %s, registered %zu of %s",
                    mpath, p->name, m->params[map[i]].count,
                    zero_dtype_name(m->params[map[i]].dtype), p->count, zero_dtype_name(p->dtype));
  }
  /* the old ranks whose files this rank reads: verify them first */
  char* need = calloc((size_t)m->world, 1);
  FILE** files = calloc((size_t)m->world, sizeof(FILE*));
  if (need == NULL || files == NULL) res = zero_fail(qcclSystemError, "out of memory");
  size_t r = (size_t)z->rank;
  for (int k = 0; k < z->nunits && res == qcclSuccess; k++) {
    zero_unit_t* u = &z->units[k];
    for (int i = u->first; i < u->last; i++) {
      zero_param_t* p = &z->params[i];
      size_t lo = r * u->s, hi = lo + u->mine;
      size_t plo = p->offset > lo ? p->offset : lo;
      size_t phi = p->offset + p->count < hi ? p->offset + p->count : hi;
      if (plo >= phi) continue;
      const zero_ck_param_t* cp = &m->params[map[i]];
      size_t os = m->units[cp->unit].s;
      size_t a = cp->offset + (plo - p->offset), b = cp->offset + (phi - p->offset) - 1;
      for (size_t q = a / os; q <= b / os; q++) need[q] = 1;
    }
  }
  for (int q = 0; q < m->world && res == qcclSuccess; q++) {
    if (!need[q]) continue;
    res = zero_shard_verify(m, q);
    if (res != qcclSuccess) *badfile = q;
  }
  for (int k = 0; k < z->nunits && res == qcclSuccess; k++) {
    zero_unit_t* u = &z->units[k];
    for (int i = u->first; i < u->last && res == qcclSuccess; i++) {
      zero_param_t* p = &z->params[i];
      size_t lo = r * u->s, hi = lo + u->mine;
      size_t plo = p->offset > lo ? p->offset : lo;
      size_t phi = p->offset + p->count < hi ? p->offset + p->count : hi;
      if (plo >= phi) continue;
      for (int a = 0; a < 3 && res == qcclSuccess; a++)
        res = zero_param_read(m, files, map[i], a, plo - p->offset, phi - plo,
                              nm[3 * k + a] + (plo - lo));
    }
  }
  for (int q = 0; q < m->world && files != NULL; q++)
    if (files[q] != NULL) fclose(files[q]);
  free(files);
  free(need);
  free(map);
  return res;
}

qcclResult_t qcclZeroLoad(qcclZero_t z, const char* dir) {
  if (z == NULL) return zero_fail(qcclInvalidArgument, "qcclZeroLoad: zero is NULL");
  if (dir == NULL || dir[0] == '\0' || strlen(dir) > ZERO_CKPT_PATH - 128)
    return zero_fail(qcclInvalidArgument, "qcclZeroLoad: dir is NULL, empty or too long");
  ZERO_CHECK(zero_layout(z));
  if (z->micro != 0)
    return zero_fail(qcclInvalidUsage, "qcclZeroLoad: called inside an accumulation window");
  ZERO_CHECK(zero_prefetch_drain(z));
  zero_manifest_t m;
  qcclResult_t res = zero_manifest_read(dir, &m);
  float** nm = calloc((size_t)z->nunits * 3, sizeof(float*));
  if (nm == NULL) res = zero_fail(qcclSystemError, "qcclZeroLoad: out of memory");
  for (int k = 0; k < z->nunits && res == qcclSuccess; k++)
    for (int a = 0; a < 3; a++) {
      nm[3 * k + a] = calloc(z->units[k].s + 1, sizeof(float));
      if (nm[3 * k + a] == NULL) res = zero_fail(qcclSystemError, "qcclZeroLoad: out of memory");
    }
  int badfile = INT_MAX;
  if (res == qcclSuccess) res = zero_load_local(z, &m, nm, &badfile);
  /* agree: the lowest bad shard file, or -1 for any other failure */
  int32_t code = res == qcclSuccess ? INT_MAX : badfile != INT_MAX ? badfile : -1;
  qcclResult_t cres = qcclAllReduce(&code, &code, 1, qcclInt32, qcclMin, z->comm, NULL);
  if (cres != qcclSuccess)
    res = zero_fail_call(cres, z->comm, "qcclZeroLoad: status all-reduce");
  else if (code != INT_MAX && res == qcclSuccess) {
    if (code >= 0) {
      char path[ZERO_CKPT_PATH + 64];
      zero_shard_path(&m, code, path, sizeof path);
      res = zero_fail(qcclInvalidUsage, "%s: truncated or corrupt (found by another rank)", path);
    } else {
      res = zero_fail(qcclInvalidUsage, "qcclZeroLoad: %s failed to load on another rank", dir);
    }
  }
  if (res == qcclSuccess) {
    for (int k = 0; k < z->nunits; k++) {
      zero_unit_t* u = &z->units[k];
      memcpy(u->master, nm[3 * k], u->s * sizeof(float));
      memcpy(u->m, nm[3 * k + 1], u->s * sizeof(float));
      memcpy(u->v, nm[3 * k + 2], u->s * sizeof(float));
    }
    zero_grad_clear(z);
    z->step = m.step;
    if (z->cfg.fp16 && z->cfg.lossScale == 0.0) {
      z->scale = m.scale;
      z->hyst_left = m.hyst_left;
      z->good_steps = m.good_steps;
    }
    z->generation++;
    res = zero_publish(z);
  }
  for (int k = 0; nm != NULL && k < z->nunits * 3; k++) free(nm[k]);
  free(nm);
  zero_manifest_free(&m);
  return res;
}
