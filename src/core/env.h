/*
 * env.h - every environment variable qccl reads goes through here, so each
 * read is logged once at INFO (subsystem ENV) and all are listed in one
 * table (docs/ENV.md). One rule for all of them (env.c): decimal numbers,
 * K / M / G where sizes are meant, keywords in any case, and an error that
 * names the variable for anything else.
 */
#ifndef QCCL_CORE_ENV_H_
#define QCCL_CORE_ENV_H_

#include <stddef.h>
#include <stdint.h>
#include "qccl.h"

/* The raw value of name, or NULL when unset (an empty value counts as set). */
const char* env_get(const char* name);

/* Parses name as a decimal integer in [lo, hi]; unset gives def. A malformed or
 * out-of-range value is an error that names the variable. */
qcclResult_t env_get_int(const char* name, int64_t def, int64_t lo, int64_t hi, int64_t* out);

/* As env_get_int for a size in bytes: decimal, one optional K / M / G suffix
 * (2^10 / 2^20 / 2^30, either case), never negative. */
qcclResult_t env_get_size(const char* name, int64_t def, int64_t lo, int64_t hi, int64_t* out);

/* Parses name as a positive decimal number of seconds (digits and at most
 * one point); unset gives def. */
qcclResult_t env_get_seconds(const char* name, double def, double* out);

/* The same rules on a given text v (name only labels the error). Pure: no
 * getenv; *out is set only on success. */
qcclResult_t env_parse_int(const char* name, const char* v, int64_t lo, int64_t hi, int64_t* out);
qcclResult_t env_parse_size(const char* name, const char* v, int64_t lo, int64_t hi, int64_t* out);
qcclResult_t env_parse_seconds(const char* name, const char* v, double* out);

/* 1 when v is the keyword word, in any case: the one case rule. */
int env_word_is(const char* v, const char* word);

/* Copies v into buf (len bytes) for a tokenizing parser, or fails naming the
 * variable when it would be cut. */
qcclResult_t env_copy(const char* name, const char* v, char* buf, size_t len);

#endif /* QCCL_CORE_ENV_H_ */
