/*
 * zero_ckpt.h - the checkpoint format, shared by the save / load of the
 * engine (zero_ckpt.c) and the local tools (zero_ckpt_tool.c).
 *
 * A directory given to qcclZeroSave holds one subdirectory per checkpoint,
 * ckpt-<step>-<nonce>/, and a file `latest` ("<subdirectory> <manifest
 * checksum>\n") naming the complete one to load; `latest` is replaced
 * (rename) only after every rank's shard file and the manifest are on
 * disk (fsync), so a save that dies half-way leaves the previous one
 * loading. A checkpoint holds:
 *   rank<r>.shard  rank r's shards: a 64-byte header (magic "QCCLZSH1",
 *                  version, rank, world size, unit count, payload bytes,
 *                  step; little endian), then per unit its master, first
 *                  and second moment shard (mine_k floats each, f32 LE);
 *   manifest.json  the layout (units: n, s; parameters: name, count,
 *                  dtype, unit, offset), step, loss scaler, optimizer
 *                  settings, stage, world size, and per shard file its
 *                  bytes and FNV-1a 64 checksum.
 * Loading maps every element of the new layout to (old unit, old rank,
 * position), so any world size and stage loads any checkpoint.
 */
#ifndef QCCL_SRC_ZERO_ZERO_CKPT_H_
#define QCCL_SRC_ZERO_ZERO_CKPT_H_

#include <stdint.h>
#include <stdio.h>

#include "qccl.h"

#define ZERO_CKPT_MAGIC "QCCLZSH1"
#define ZERO_CKPT_HEADER 64
#define ZERO_CKPT_PATH 4096

typedef struct {
  char* name;
  size_t count;
  qcclDataType_t dtype;
  int unit;
  size_t offset;
} zero_ck_param_t;

typedef struct {
  size_t n, s;
} zero_ck_unit_t;

typedef struct {
  uint64_t bytes, hash;
} zero_ck_shard_t;

typedef struct {
  char dir[ZERO_CKPT_PATH]; /* the checkpoint's own directory */
  int world, stage, nparams, nunits;
  zero_ck_param_t* params;
  zero_ck_unit_t* units;
  zero_ck_shard_t* shards;
  unsigned long long step;
  double scale;
  int hyst_left;
  long good_steps;
  char optimizer[32];
} zero_manifest_t;

/* FNV-1a 64 over bytes, continuing from h (start with ZERO_FNV_INIT). */
#define ZERO_FNV_INIT 0xcbf29ce484222325ull
uint64_t zero_fnv(uint64_t h, const void* p, size_t n);

/* Reads the manifest of the checkpoint named by dir (dir/latest, or dir
 * itself when it holds manifest.json), checking it against the checksum
 * in `latest`. Errors name the file. */
qcclResult_t zero_manifest_read(const char* dir, zero_manifest_t* m);
void zero_manifest_free(zero_manifest_t* m);

/* The path of rank r's shard file of m. */
void zero_shard_path(const zero_manifest_t* m, int r, char* out, size_t len);

/* Elements of old rank r's shard of unit k. */
size_t zero_ck_mine(const zero_manifest_t* m, int k, int r);

/* Checks the size and checksum of rank r's shard file. */
qcclResult_t zero_shard_verify(const zero_manifest_t* m, int r);

/* Reads count floats of array a (0 master, 1 first moment, 2 second) of
 * unit k from old rank r's file f, from position pos of that shard. */
qcclResult_t zero_shard_read(const zero_manifest_t* m, FILE* f, int r, int k, int a, size_t pos,
                             size_t count, float* out);

/* Reads count floats of array a of parameter p (manifest index) starting
 * at element first of the parameter, across the old ranks' files (files[r]
 * opened on demand). */
qcclResult_t zero_param_read(const zero_manifest_t* m, FILE** files, int p, int a, size_t first,
                             size_t count, float* out);

#endif /* QCCL_SRC_ZERO_ZERO_CKPT_H_ */
