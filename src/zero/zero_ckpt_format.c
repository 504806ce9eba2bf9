/*
 * zero_ckpt_format.c - reading the checkpoint format of zero_ckpt.h: the
 * `latest` pointer, the manifest (jansson; checked against the checksum
 * that `latest` records), and element ranges of the shard files, with
 * every size and checksum verified and every error naming its file.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "zero.h"
#include "zero_ckpt.h"

uint64_t zero_fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static qcclResult_t zero_read_file(const char* path, char** data, size_t* len) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return zero_fail(qcclSystemError, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || st.st_size > (1 << 30)) {
    fclose(f);
    return zero_fail(qcclSystemError, "%s: cannot read its size", path);
  }
  char* buf = malloc((size_t)st.st_size + 1);
  if (buf == NULL || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
    free(buf);
    fclose(f);
    return zero_fail(qcclSystemError, "%s: cannot read", path);
  }
  fclose(f);
  buf[st.st_size] = '\0';
  *data = buf;
  *len = (size_t)st.st_size;
  return qcclSuccess;
}

static int zero_dtype_parse(const char* s, qcclDataType_t* dt) {
  if (strcmp(s, "F32") == 0)
    *dt = qcclFloat32;
  else if (strcmp(s, "BF16") == 0)
    *dt = qcclBfloat16;
  else if (strcmp(s, "F16") == 0)
    *dt = qcclFloat16;
  else
    return 0;
  return 1;
}

void zero_manifest_free(zero_manifest_t* m) {
  for (int i = 0; i < m->nparams && m->params != NULL; i++) free(m->params[i].name);
  free(m->params);
  free(m->units);
  free(m->shards);
  memset(m, 0, sizeof(*m));
}

#define ZERO_BAD(...)                               \
  do {                                              \
    res = zero_fail(qcclInvalidUsage, __VA_ARGS__); \
    goto out;                                       \
  } while (0)

/* Parses the manifest text into m (its fields are checked for type and range). */
static qcclResult_t zero_manifest_parse(const char* path, const char* text, zero_manifest_t* m) {
  qcclResult_t res = qcclSuccess;
  json_error_t jerr;
  json_t* root = json_loads(text, 0, &jerr);
  if (root == NULL) {
    res = zero_fail(qcclInvalidUsage, "%s: corrupt manifest: line %d: %s", path, jerr.line,
                    jerr.text);
    return res;
  }
  json_t *units = NULL, *params = NULL, *shards = NULL, *scaler = NULL;
  const char* fmt = NULL;
  json_int_t version = 0, world = 0, stage = 0, step = 0;
  if (json_unpack_ex(root, &jerr, 0, "{s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o}", "format",
                     &fmt, "version", &version, "world_size", &world, "stage", &stage, "step",
                     &step, "units", &units, "params", &params, "shards", &shards, "loss_scaler",
                     &scaler) != 0)
    ZERO_BAD("%s: corrupt manifest: %s", path, jerr.text);
  if (strcmp(fmt, "qccl-zero-checkpoint") != 0 || version != 1)
    ZERO_BAD("%s: not a qccl ZeRO checkpoint manifest of version 1", path);
  if (world < 1 || world > (1 << 20) || !json_is_array(units) || !json_is_array(params) ||
      !json_is_array(shards) || json_array_size(shards) != (size_t)world || step < 0)
    ZERO_BAD("%s: corrupt manifest: world size, units, params or shards", path);
  m->world = (int)world;
  m->stage = (int)stage;
  m->step = (unsigned long long)step;
  json_int_t hyst = 0, good = 0;
  if (json_unpack_ex(scaler, &jerr, 0, "{s:F, s:I, s:I}", "scale", &m->scale, "hysteresis_left",
                     &hyst, "good_steps", &good) != 0)
    ZERO_BAD("%s: corrupt manifest: loss_scaler: %s", path, jerr.text);
  m->hyst_left = (int)hyst;
  m->good_steps = (long)good;
  const char* opt = "?";
  json_unpack(root, "{s:{s:s}}", "optimizer", "type", &opt);
  snprintf(m->optimizer, sizeof m->optimizer, "%s", opt);
  m->nunits = (int)json_array_size(units);
  m->nparams = (int)json_array_size(params);
  m->units = calloc((size_t)m->nunits + 1, sizeof(zero_ck_unit_t));
  m->params = calloc((size_t)m->nparams + 1, sizeof(zero_ck_param_t));
  m->shards = calloc((size_t)m->world, sizeof(zero_ck_shard_t));
  if (m->units == NULL || m->params == NULL || m->shards == NULL) {
    res = zero_fail(qcclSystemError, "%s: out of memory", path);
    goto out;
  }
  for (int k = 0; k < m->nunits; k++) {
    json_int_t n = 0, s = 0;
    if (json_unpack(json_array_get(units, (size_t)k), "{s:I, s:I}", "n", &n, "s", &s) != 0 ||
        n < 1 || s < 1 || s * world < n || (s - 1) * world >= n)
      ZERO_BAD("%s: corrupt manifest: unit %d", path, k);
    m->units[k].n = (size_t)n;
    m->units[k].s = (size_t)s;
  }
  for (int i = 0; i < m->nparams; i++) {
    const char *name, *dt;
    json_int_t count, unit, offset;
    if (json_unpack(json_array_get(params, (size_t)i), "{s:s, s:I, s:s, s:I, s:I}", "name", &name,
                    "count", &count, "dtype", &dt, "unit", &unit, "offset", &offset) != 0 ||
        !zero_dtype_parse(dt, &m->params[i].dtype) || unit < 0 || unit >= m->nunits || count < 1 ||
        offset < 0 || (size_t)(offset + count) > m->units[unit].n)
      ZERO_BAD("%s: corrupt manifest: parameter %d", path, i);
    m->params[i].name = strdup(name);
    m->params[i].count = (size_t)count;
    m->params[i].unit = (int)unit;
    m->params[i].offset = (size_t)offset;
  }
  for (int r = 0; r < m->world; r++) {
    const char* h;
    json_int_t bytes;
    if (json_unpack(json_array_get(shards, (size_t)r), "{s:I, s:s}", "bytes", &bytes, "fnv1a64",
                    &h) != 0 ||
        bytes < ZERO_CKPT_HEADER)
      ZERO_BAD("%s: corrupt manifest: shard %d", path, r);
    m->shards[r].bytes = (uint64_t)bytes;
    m->shards[r].hash = strtoull(h, NULL, 16);
  }
out:
  json_decref(root);
  return res;
}

qcclResult_t zero_manifest_read(const char* dir, zero_manifest_t* m) {
  memset(m, 0, sizeof(*m));
  char path[ZERO_CKPT_PATH + 64];
  snprintf(path, sizeof path, "%s/latest", dir);
  char* text = NULL;
  size_t len;
  int have_hash = 0;
  uint64_t want = 0;
  struct stat st;
  if (stat(path, &st) == 0) {
    ZERO_CHECK(zero_read_file(path, &text, &len));
    char tag[256];
    unsigned long long h;
    if (sscanf(text, "%255s %llx", tag, &h) != 2 || strchr(tag, '/') != NULL) {
      free(text);
      return zero_fail(qcclInvalidUsage, "%s: corrupt (expected \"<checkpoint> <checksum>\")",
                       path);
    }
    free(text);
    snprintf(m->dir, sizeof m->dir, "%s/%s", dir, tag);
    have_hash = 1;
    want = h;
  } else {
    snprintf(m->dir, sizeof m->dir, "%s", dir);
  }
  snprintf(path, sizeof path, "%s/manifest.json", m->dir);
  ZERO_CHECK(zero_read_file(path, &text, &len));
  if (have_hash && zero_fnv(ZERO_FNV_INIT, text, len) != want) {
    free(text);
    return zero_fail(qcclInvalidUsage, "%s: checksum mismatch (corrupt manifest)", path);
  }
  qcclResult_t res = zero_manifest_parse(path, text, m);
  free(text);
  if (res != qcclSuccess) zero_manifest_free(m);
  return res;
}

void zero_shard_path(const zero_manifest_t* m, int r, char* out, size_t len) {
  snprintf(out, len, "%s/rank%d.shard", m->dir, r);
}

size_t zero_ck_mine(const zero_manifest_t* m, int k, int r) {
  size_t n = m->units[k].n, s = m->units[k].s, lo = (size_t)r * s;
  if (n <= lo) return 0;
  return n - lo < s ? n - lo : s;
}

qcclResult_t zero_shard_verify(const zero_manifest_t* m, int r) {
  char path[ZERO_CKPT_PATH + 64];
  zero_shard_path(m, r, path, sizeof path);
  FILE* f = fopen(path, "rb");
  if (f == NULL) return zero_fail(qcclSystemError, "%s: cannot open: %s", path, strerror(errno));
  uint64_t expect = ZERO_CKPT_HEADER;
  for (int k = 0; k < m->nunits; k++) expect += 3 * 4 * (uint64_t)zero_ck_mine(m, k, r);
  unsigned char buf[1 << 16];
  uint64_t h = ZERO_FNV_INIT, total = 0;
  size_t got;
  unsigned char head[ZERO_CKPT_HEADER];
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
    if (total < ZERO_CKPT_HEADER)
      memcpy(head + total, buf,
             got < ZERO_CKPT_HEADER - total ? got : (size_t)(ZERO_CKPT_HEADER - total));
    h = zero_fnv(h, buf, got);
    total += got;
  }
  int err = ferror(f);
  fclose(f);
  if (err) return zero_fail(qcclSystemError, "%s: read error", path);
  if (total != m->shards[r].bytes || total != expect)
    return zero_fail(qcclInvalidUsage,
                     "%s: truncated or wrong size (%llu bytes, the manifest says %llu, the "
                     "layout %llu)",
                     path, (unsigned long long)total, (unsigned long long)m->shards[r].bytes,
                     (unsigned long long)expect);
  if (h != m->shards[r].hash)
    return zero_fail(qcclInvalidUsage, "%s: checksum mismatch (corrupt shard file)", path);
  uint32_t rank, world;
  memcpy(&rank, head + 12, 4);
  memcpy(&world, head + 16, 4);
  if (memcmp(head, ZERO_CKPT_MAGIC, 8) != 0 || rank != (uint32_t)r || world != (uint32_t)m->world)
    return zero_fail(qcclInvalidUsage, "%s: not rank %d's shard of a %d-rank checkpoint", path, r,
                     m->world);
  return qcclSuccess;
}

qcclResult_t zero_shard_read(const zero_manifest_t* m, FILE* f, int r, int k, int a, size_t pos,
                             size_t count, float* out) {
  uint64_t off = ZERO_CKPT_HEADER;
  for (int j = 0; j < k; j++) off += 3 * 4 * (uint64_t)zero_ck_mine(m, j, r);
  off += ((uint64_t)a * zero_ck_mine(m, k, r) + pos) * 4;
  if (fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(out, 4, count, f) != count) {
    char path[ZERO_CKPT_PATH + 64];
    zero_shard_path(m, r, path, sizeof path);
    return zero_fail(qcclSystemError, "%s: cannot read %zu floats at byte %llu", path, count,
                     (unsigned long long)off);
  }
  return qcclSuccess;
}

qcclResult_t zero_param_read(const zero_manifest_t* m, FILE** files, int p, int a, size_t first,
                             size_t count, float* out) {
  const zero_ck_param_t* cp = &m->params[p];
  size_t s = m->units[cp->unit].s;
  size_t pos = cp->offset + first; /* element of the old unit */
  while (count > 0) {
    int r = (int)(pos / s);
    size_t in = pos % s, take = s - in < count ? s - in : count;
    if (files[r] == NULL) {
      char path[ZERO_CKPT_PATH + 64];
      zero_shard_path(m, r, path, sizeof path);
      files[r] = fopen(path, "rb");
      if (files[r] == NULL)
        return zero_fail(qcclSystemError, "%s: cannot open: %s", path, strerror(errno));
    }
    ZERO_CHECK(zero_shard_read(m, files[r], r, cp->unit, a, in, take, out));
    out += take;
    pos += take;
    count -= take;
  }
  return qcclSuccess;
}
