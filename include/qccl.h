/*
 * qccl.h - the public API of qccl, a collective communication library with
 * quantized and hierarchical collectives for sharded data-parallel training.
 *
 * The API has NCCL's shape, a letter apart: a program written against
 * nccl.h (NCCL 2.28) moves to qccl by renaming `nccl` to `qccl` and `NCCL`
 * to `QCCL`. Argument order, element counts, in-place rules, enum values and
 * result codes are NCCL's. qccl adds `qcclTimeout` after NCCL's result codes,
 * host-memory collectives without CUDA, and a block-quantization codec.
 *
 * Every function returns a qcclResult_t. On failure, qcclGetLastError()
 * returns a message that names the offending argument or peer. Output
 * arguments are written only on success.
 */
#ifndef QCCL_H_
#define QCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define QCCL_MAJOR 0
#define QCCL_MINOR 1
#define QCCL_PATCH 0
#define QCCL_SUFFIX ""

/* Version as one integer: major * 10000 + minor * 100 + patch (NCCL's
 * formula for versions past 2.8). */
#define QCCL_VERSION(X, Y, Z) ((X)*10000 + (Y)*100 + (Z))
#define QCCL_VERSION_CODE QCCL_VERSION(QCCL_MAJOR, QCCL_MINOR, QCCL_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; what this header declares
 * is its exported interface. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* Opaque handle to a communicator. */
typedef struct qcclComm* qcclComm_t;
#define QCCL_COMM_NULL NULL

/* The rendezvous handle made by qcclGetUniqueId on one rank and passed by
 * the application to every rank (128 bytes, like ncclUniqueId). It holds
 * the root's address and port and a random secret; treat it as opaque. */
#define QCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[QCCL_UNIQUE_ID_BYTES];
} qcclUniqueId;

/* Result codes: NCCL's values, then qccl's own. */
typedef enum {
  qcclSuccess = 0,
  qcclUnhandledCudaError = 1,
  qcclSystemError = 2,
  qcclInternalError = 3,
  qcclInvalidArgument = 4,
  qcclInvalidUsage = 5,
  qcclRemoteError = 6,
  qcclInProgress = 7,
  qcclTimeout = 8, /* a peer did not answer within QCCL_TIMEOUT seconds */
  qcclNumResults = 9
} qcclResult_t;

#define QCCL_CONFIG_UNDEF_INT INT_MIN
#define QCCL_CONFIG_UNDEF_PTR NULL
#define QCCL_SPLIT_NOCOLOR -1

/* Communicator configuration. Always start from QCCL_CONFIG_INITIALIZER so
 * that the struct can grow without breaking the ABI; size, magic and
 * version are checked. Fields left at QCCL_CONFIG_UNDEF_* take defaults. */
typedef struct qcclConfig_v100 {
  /* set by the initializer, never by the user */
  size_t size;
  unsigned int magic;
  unsigned int version;
  /* user settable */
  int blocking;         /* 1 (default): calls return when done. 0 is refused. */
  const char* commName; /* shown in log lines; may be NULL */
  int timeoutSec;       /* overrides QCCL_TIMEOUT for this communicator */
} qcclConfig_t;

#define QCCL_CONFIG_MAGIC 0x71cc1c0fu
#define QCCL_CONFIG_INITIALIZER                                                        \
  {                                                                                    \
    sizeof(qcclConfig_t), QCCL_CONFIG_MAGIC, QCCL_VERSION_CODE, QCCL_CONFIG_UNDEF_INT, \
        QCCL_CONFIG_UNDEF_PTR, QCCL_CONFIG_UNDEF_INT                                   \
  }

/* Reduction operations (NCCL's values). Avg is for floating types only. */
typedef enum {
  qcclSum = 0,
  qcclProd = 1,
  qcclMax = 2,
  qcclMin = 3,
  qcclAvg = 4,
  qcclNumOps = 5
} qcclRedOp_t;

/* Data types (NCCL's values). Float16, Bfloat16 and the two fp8 formats are
 * reduced in f32 and rounded once (to nearest even) at the end. */
typedef enum {
  qcclInt8 = 0,
  qcclChar = 0,
  qcclUint8 = 1,
  qcclInt32 = 2,
  qcclInt = 2,
  qcclUint32 = 3,
  qcclInt64 = 4,
  qcclUint64 = 5,
  qcclFloat16 = 6,
  qcclHalf = 6,
  qcclFloat32 = 7,
  qcclFloat = 7,
  qcclFloat64 = 8,
  qcclDouble = 8,
  qcclBfloat16 = 9,
  qcclFloat8e4m3 = 10,
  qcclFloat8e5m2 = 11,
  qcclNumTypes = 12
} qcclDataType_t;

/* A stream, in NCCL's slot of every call:
 *  - NULL: the call returns when the operation is complete on this rank;
 *  - a host stream from qcclStreamCreate: the call checks its arguments at
 *    once (a bad argument is the call's own result, nothing is queued),
 *    then is queued and returns; qcclStreamSynchronize / qcclStreamQuery
 *    and events report completion and asynchronous errors;
 *  - any other value is taken as a cudaStream_t (device buffers, a later
 *    version; until then refused with qcclInvalidArgument naming stream).
 * Host streams are told apart by address: the library keeps the set of
 * live host streams, so a cudaStream_t (or cudaStreamLegacy = 0x1) is
 * never dereferenced as one of ours. */
typedef void* qcclStream_t;

/* An event recorded on a host stream: it completes when every call queued
 * on that stream before the record has completed. One event per call
 * gives a handle per call. */
typedef struct qcclEvent* qcclEvent_t;

/* ------------------------------------------------------------------------
 * Library and communicator lifecycle
 * ------------------------------------------------------------------------ */

/* Writes QCCL_VERSION_CODE of the linked library to *version. */
qcclResult_t qcclGetVersion(int* version);

/* Makes a new rendezvous id on the calling rank (normally rank 0): it
 * starts a root listener on this host (interface from QCCL_SOCKET_IFNAME,
 * else the first non-loopback interface that is up, else loopback) and
 * draws a random secret. The application sends the id to every rank, which
 * then calls qcclCommInitRank. The listener serves one communicator and
 * ends after it, or after QCCL_TIMEOUT seconds. */
qcclResult_t qcclGetUniqueId(qcclUniqueId* uniqueId);

/* Creates a communicator of nranks ranks, this one being `rank` (0 <= rank
 * < nranks). Collective over all nranks ranks, which must pass the same id.
 * Blocks until every rank has joined or QCCL_TIMEOUT expires. */
qcclResult_t qcclCommInitRank(qcclComm_t* comm, int nranks, qcclUniqueId commId, int rank);

/* As qcclCommInitRank, with a configuration (may be NULL for defaults). */
qcclResult_t qcclCommInitRankConfig(qcclComm_t* comm, int nranks, qcclUniqueId commId, int rank,
                                    qcclConfig_t* config);

/* Creates a communicator from the launcher's environment, first match
 * wins: torchrun or qcclrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
 * PMIx (mpirun, srun --mpi=pmix, prterun: rank 0's random id is handed out
 * by the launcher, nothing to set), Open MPI (OMPI_COMM_WORLD_RANK,
 * OMPI_COMM_WORLD_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS), MPICH
 * (PMI_RANK, PMI_SIZE). Without PMIx the root address is
 * QCCL_COMM_ID=host:port, else MASTER_ADDR:MASTER_PORT (MASTER_PORT+1 under
 * torchrun, whose own store holds MASTER_PORT), and the secret comes from
 * QCCL_SECRET_FILE or QCCL_SECRET (else it is derived from public values,
 * with a warning). Collective over every rank of the job. The error names
 * the variable that is missing or malformed. */
qcclResult_t qcclCommInitFromEnv(qcclComm_t* comm);

/* Splits comm into sub-communicators, one per color (NCCL's semantics):
 * ranks passing the same color join the same new communicator, ordered by
 * key and then by their rank in comm. Color QCCL_SPLIT_NOCOLOR (or any
 * negative color) makes *newcomm NULL. Collective over comm, in the same
 * place of every rank's sequence of calls on comm: it first waits for the
 * calls issued on comm before it (queued on host streams too), since one
 * of them may be setting up a lane over the same connections. config may
 * be NULL (the parent's settings are inherited). */
qcclResult_t qcclCommSplit(qcclComm_t comm, int color, int key, qcclComm_t* newcomm,
                           qcclConfig_t* config);

/* Waits until every call of comm queued on host streams has completed
 * (or failed), compares the ranks' records of a last call that ended
 * before the others had posted theirs (QCCL_CHECK: an eager root's;
 * qcclInvalidUsage if they disagree), then returns comm's asynchronous
 * error. Calls after it other than qcclCommDestroy and the query functions
 * are refused. */
qcclResult_t qcclCommFinalize(qcclComm_t comm);

/* Waits until every call of comm queued on host streams has completed (each
 * within QCCL_TIMEOUT), then frees every resource of comm. Does not wait
 * for other ranks. Calling it while another thread is inside a call on
 * comm is an error of the program (use qcclCommAbort). */
qcclResult_t qcclCommDestroy(qcclComm_t comm);

/* Marks comm as failed, wakes peers waiting on this rank (they get
 * qcclRemoteError), and returns at once. Safe from any thread while other
 * threads are inside calls on comm or calls are queued on streams: every
 * such call returns (or completes on its stream) with an error within 1 s,
 * and comm's memory is freed when the last of them has left. The handle
 * must not be used after this call. */
qcclResult_t qcclCommAbort(qcclComm_t comm);

/* Reports the first asynchronous error of comm (qcclSuccess if none). Once
 * a communicator has seen a timeout or a remote failure, every later call
 * on it returns that error. */
qcclResult_t qcclCommGetAsyncError(qcclComm_t comm, qcclResult_t* asyncError);

/* Number of ranks in comm. */
qcclResult_t qcclCommCount(const qcclComm_t comm, int* count);

/* This rank's index in comm. */
qcclResult_t qcclCommUserRank(const qcclComm_t comm, int* rank);

/* A static string that names result code `result`. */
const char* qcclGetErrorString(qcclResult_t result);

/* The message behind the last failure on comm, or, with comm NULL, the
 * last failure of this thread (e.g. of a qcclCommInitRank that made no
 * communicator). Never NULL; "" when nothing failed. */
const char* qcclGetLastError(qcclComm_t comm);

/* ------------------------------------------------------------------------
 * Collectives. Counts are in elements. Every rank of comm must call the
 * same collectives in the same order with the same count, datatype, op and
 * root. With stream NULL the call returns when the result is in recvbuff.
 * Buffers are host memory. With count 0 the buffers may be NULL.
 * ------------------------------------------------------------------------ */

/* Reduces count elements of sendbuff over all ranks with op and leaves the
 * result in recvbuff on every rank. In place if sendbuff == recvbuff. The
 * result is bitwise identical on every rank and every run. */
qcclResult_t qcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           qcclDataType_t datatype, qcclRedOp_t op, qcclComm_t comm,
                           qcclStream_t stream);

/* Copies count elements of root's sendbuff to recvbuff on every rank.
 * In place if sendbuff == recvbuff. sendbuff is read on root only. */
qcclResult_t qcclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           qcclDataType_t datatype, int root, qcclComm_t comm, qcclStream_t stream);

/* Reduces count elements of sendbuff over all ranks into recvbuff on root.
 * recvbuff may be NULL on other ranks. In place if sendbuff == recvbuff. */
qcclResult_t qcclReduce(const void* sendbuff, void* recvbuff, size_t count, qcclDataType_t datatype,
                        qcclRedOp_t op, int root, qcclComm_t comm, qcclStream_t stream);

/* Each rank contributes sendcount elements; recvbuff (nranks * sendcount
 * elements) receives rank i's at offset i * sendcount. In place if
 * sendbuff == recvbuff + rank * sendcount. */
qcclResult_t qcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           qcclDataType_t datatype, qcclComm_t comm, qcclStream_t stream);

/* sendbuff holds nranks * recvcount elements; block i of the reduction over
 * all ranks lands in recvbuff of rank i. In place if recvbuff == sendbuff +
 * rank * recvcount. */
qcclResult_t qcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               qcclDataType_t datatype, qcclRedOp_t op, qcclComm_t comm,
                               qcclStream_t stream);

/* Sends count elements to every rank: sendbuff + j * count goes to rank j,
 * and what rank i sent lands at recvbuff + i * count. Buffers must not
 * overlap (as in NCCL, there is no in-place all-to-all). */
qcclResult_t qcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          qcclDataType_t datatype, qcclComm_t comm, qcclStream_t stream);

/* Each rank sends count elements to root, where rank i's land at recvbuff +
 * i * count. recvbuff is used on root only. In place if sendbuff ==
 * recvbuff + root * count. */
qcclResult_t qcclGather(const void* sendbuff, void* recvbuff, size_t count, qcclDataType_t datatype,
                        int root, qcclComm_t comm, qcclStream_t stream);

/* Root sends sendbuff + i * count (count elements) to rank i. sendbuff is
 * used on root only. In place if recvbuff == sendbuff + root * count. */
qcclResult_t qcclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         qcclDataType_t datatype, int root, qcclComm_t comm, qcclStream_t stream);

/* Sends count elements to rank peer, which must post a matching qcclRecv
 * (same count and datatype). Sends to one peer are matched with its
 * receives in order. Outside a group the call returns when the data has
 * left sendbuff; exchanges that depend on each other (a ring shift, say)
 * must be inside qcclGroupStart/qcclGroupEnd. Within a group, sendbuff may
 * overlap the buffer of a receive (a shift in place): the data sent is
 * sendbuff as it was at qcclGroupEnd. */
qcclResult_t qcclSend(const void* sendbuff, size_t count, qcclDataType_t datatype, int peer,
                      qcclComm_t comm, qcclStream_t stream);

/* Receives count elements from rank peer into recvbuff. A size mismatch
 * with the matching send is reported as qcclInvalidUsage. */
qcclResult_t qcclRecv(void* recvbuff, size_t count, qcclDataType_t datatype, int peer,
                      qcclComm_t comm, qcclStream_t stream);

/* Returns when every rank of comm has entered the barrier. */
qcclResult_t qcclBarrier(qcclComm_t comm, qcclStream_t stream);

/* Starts a group: calls up to the matching qcclGroupEnd are queued, not
 * run. Groups nest; the outermost End runs them. */
qcclResult_t qcclGroupStart(void);

/* Ends a group: runs the queued calls in order, progressing consecutive
 * sends and receives together (so a ring exchange cannot deadlock), and
 * returns when all are complete, or the first error. */
qcclResult_t qcclGroupEnd(void);

/* ------------------------------------------------------------------------
 * Host streams and events (src/core/stream.c, collectives/engine.c)
 *
 * A host stream runs the calls queued on it in the order they were queued,
 * one after the other, on a thread of its own. As with NCCL, every rank
 * must issue a communicator's calls in the same order (queued or called
 * with stream NULL, whatever their streams). A communicator's plain
 * collectives take turns on QCCL_LANES lanes (2 by default): the k-th runs
 * on lane k % QCCL_LANES, after the lane's previous call, so collectives on
 * different streams progress concurrently; a group of several calls,
 * sends and receives, the ZeRO++ calls, and the first call of each lane
 * (which sets the lane up) run after every call issued before them. Calls
 * of different communicators on different streams run concurrently. A
 * group (qcclGroupStart/End) is one queued unit; all its calls must name
 * the same stream.
 *
 * Errors: a call that fails on a stream (a dead or silent peer, the
 * timeout) fails its communicator for good (qcclCommGetAsyncError, and
 * every later call on it returns that error). The stream keeps its first
 * error: qcclStreamSynchronize, qcclStreamQuery and the events recorded
 * after it return it, and qcclGetLastError(NULL) on the waiting thread
 * gives its message. Calls queued after a failed one still run (calls of
 * other communicators are not affected).
 * ------------------------------------------------------------------------ */

/* Creates a host stream. */
qcclResult_t qcclStreamCreate(qcclStream_t* stream);

/* Waits until every call queued on stream has completed (each ends within
 * QCCL_TIMEOUT, or within 1 s of an abort of its communicator), then
 * frees the stream. Returns the stream's first error, or qcclSuccess. */
qcclResult_t qcclStreamDestroy(qcclStream_t stream);

/* Waits until every call queued on stream so far has completed. Returns
 * the stream's first error, or qcclSuccess. NULL returns at once. */
qcclResult_t qcclStreamSynchronize(qcclStream_t stream);

/* qcclInProgress while calls queued on stream are not complete, else the
 * stream's first error, or qcclSuccess. Never blocks. */
qcclResult_t qcclStreamQuery(qcclStream_t stream);

/* Creates an event (complete until first recorded). */
qcclResult_t qcclEventCreate(qcclEvent_t* event);

/* Records event on stream: from now on the event is complete once every
 * call queued on stream before this point has completed. Recording again
 * moves the event to the new point. */
qcclResult_t qcclEventRecord(qcclEvent_t event, qcclStream_t stream);

/* qcclInProgress, or the result of the calls before the record point (the
 * stream's first error up to there), without blocking. */
qcclResult_t qcclEventQuery(qcclEvent_t event);

/* Waits for the event's record point; returns what qcclEventQuery would. */
qcclResult_t qcclEventSynchronize(qcclEvent_t event);

/* Makes the calls queued on stream from now on wait for event's current
 * record point (a dependency between two streams). */
qcclResult_t qcclStreamWaitEvent(qcclStream_t stream, qcclEvent_t event);

/* Frees an event; a record still pending completes without it. */
qcclResult_t qcclEventDestroy(qcclEvent_t event);

/* ------------------------------------------------------------------------
 * Topology. Ranks are placed on nodes by host identity (hostname + boot
 * id, or QCCL_HOST_ID); nodes are numbered by their lowest rank, and the
 * ranks of a node by rank (local rank 0 is the node's leader). Ranks of a
 * node need not be contiguous, and nodes may hold different numbers of
 * ranks. The map is the same on every rank. The Split calls below are
 * collective over comm (every rank must call them, in the same order as
 * other collectives); each makes one qcclCommSplit, so config is as there
 * (NULL: the parent's settings, named "<parent>.node" etc.).
 * ------------------------------------------------------------------------ */

/* Where this rank is: its node (0 <= node < nnodes), its index among the
 * ranks of that node and their number. Any output may be NULL. Local. */
qcclResult_t qcclCommNodeInfo(const qcclComm_t comm, int* node, int* nnodes, int* localRank,
                              int* localSize);

/* The node and local rank of rank peer of comm. Either output may be NULL.
 * Local. */
qcclResult_t qcclCommPeerNode(const qcclComm_t comm, int peer, int* node, int* localRank);

/* The number of ranks on node (0 <= node < nnodes). Nodes of unequal sizes
 * are allowed; algorithms that need equal ones compare these. Local. */
qcclResult_t qcclCommNodeSize(const qcclComm_t comm, int node, int* size);

/* The ranks of comm on this rank's node, ordered by rank: the new rank is
 * the local rank. Never NULL. */
qcclResult_t qcclCommSplitNode(qcclComm_t comm, qcclConfig_t* config, qcclComm_t* newcomm);

/* The ranks of comm with this rank's local rank, one per node that has
 * that many ranks, ordered by node: with uneven nodes a high local rank
 * gives a smaller rail. Never NULL. */
qcclResult_t qcclCommSplitRail(qcclComm_t comm, qcclConfig_t* config, qcclComm_t* newcomm);

/* The leaders (local rank 0) of every node, ordered by node: the new rank
 * is the node. On other ranks *newcomm is NULL (NCCL's rule for a split
 * without color). */
qcclResult_t qcclCommSplitLeaders(qcclComm_t comm, qcclConfig_t* config, qcclComm_t* newcomm);

/* ------------------------------------------------------------------------
 * Host memory the ranks of a host can read directly (as ncclMemAlloc).
 * ------------------------------------------------------------------------ */

/* Allocates size bytes (rounded up to whole pages, zeroed) that the other
 * ranks of this host can map. A collective whose send buffer lies in such
 * memory lets them copy from it directly, skipping the staging copy
 * (AllGather, AlltoAll); any buffer still works with every call. Free with
 * qcclMemFree. Thread-safe. */
qcclResult_t qcclMemAlloc(void** ptr, size_t size);

/* Frees memory from qcclMemAlloc (NULL: nothing). Buffers of a collective
 * may be freed once the call returned on this rank. Another pointer is
 * qcclInvalidArgument. */
qcclResult_t qcclMemFree(void* ptr);

/* ------------------------------------------------------------------------
 * Traffic counters. Every communicator counts, per collective, the calls
 * made on it and the payload bytes this rank sent: to ranks of its own node
 * (shared memory) and to ranks of other nodes (the network). Headers of the
 * transports (TCP/IP, UCX) are not counted, so the network figure is what
 * the algorithm moved; interface counters read a few percent more. A call
 * is counted under the collective the caller made (a two-level AllReduce's
 * node and rail stages count as AllReduce); a call that a quantization
 * policy turned into a quantized collective counts under the quantized one.
 * ------------------------------------------------------------------------ */

typedef enum {
  qcclStatAllReduce = 0,
  qcclStatBroadcast = 1,
  qcclStatReduce = 2,
  qcclStatAllGather = 3,
  qcclStatReduceScatter = 4,
  qcclStatAlltoAll = 5,
  qcclStatGather = 6,
  qcclStatScatter = 7,
  qcclStatSendRecv = 8, /* qcclSend / qcclRecv */
  qcclStatBarrier = 9,
  qcclStatAllGatherQ = 10,     /* quantized all-gather (qwZ) */
  qcclStatReduceScatterQ = 11, /* quantized reduce-scatter (qgZ) */
  qcclStatAllReduceQ = 12,     /* quantized all-reduce */
  qcclStatNodeAllGather = 13,  /* all-gather inside the node from secondary shards (hpZ) */
  qcclStatNumColls = 16        /* room for more; unused slots stay 0 */
} qcclStatColl_t;

typedef struct {
  uint64_t calls;      /* calls made (count 0 included) */
  uint64_t bytesIntra; /* payload bytes sent to ranks of this node */
  uint64_t bytesInter; /* payload bytes sent to ranks of other nodes */
} qcclStatCounters_t;

typedef struct qcclStats_v1 {
  size_t size;                               /* sizeof(qcclStats_t), set by the caller */
  qcclStatCounters_t coll[qcclStatNumColls]; /* indexed by qcclStatColl_t */
  qcclStatCounters_t total;                  /* the sum over coll[] */
} qcclStats_t;

#define QCCL_STATS_INITIALIZER          \
  {                                     \
    sizeof(qcclStats_t), {{0, 0, 0}}, { \
      0, 0, 0                           \
    }                                   \
  }

/* Copies comm's counters (since its creation or the last reset) into
 * *stats, which must come from QCCL_STATS_INITIALIZER (its size field is
 * checked). Local: no communication. */
qcclResult_t qcclCommGetStats(qcclComm_t comm, qcclStats_t* stats);

/* Sets comm's counters to zero. Local. */
qcclResult_t qcclCommResetStats(qcclComm_t comm);

/* ------------------------------------------------------------------------
 * Block quantization codec (wire format v1, see docs/ARCHITECTURE.md).
 * Pure functions, no communicator: frameworks can use the format for their
 * own transports or checkpoints.
 * ------------------------------------------------------------------------ */

typedef enum { qcclQuantSymmetric = 0, qcclQuantAsymmetric = 1 } qcclQuantMode_t;
typedef enum { qcclRoundNearest = 0, qcclRoundStochastic = 1 } qcclRounding_t;

/* A versioned quantization spec; start from QCCL_QUANT_SPEC_INITIALIZER. */
typedef struct qcclQuantSpec_v1 {
  size_t size;          /* set by the initializer */
  unsigned int magic;   /* set by the initializer */
  unsigned int version; /* set by the initializer */
  int bits;             /* 8 or 4 */
  int block;            /* elements per block: a power of two, 32..4096 */
  qcclQuantMode_t mode;
  qcclRounding_t rounding;
  int rotate;              /* 1: randomized Walsh-Hadamard rotation per block */
  unsigned long long seed; /* for stochastic rounding and rotation signs */
  int rank;                /* stream index for stochastic rounding (usually the rank) */
} qcclQuantSpec_t;

#define QCCL_QUANT_SPEC_MAGIC 0x71c0de01u
#define QCCL_QUANT_SPEC_INITIALIZER                                                 \
  {                                                                                 \
    sizeof(qcclQuantSpec_t), QCCL_QUANT_SPEC_MAGIC, 1u, 8, 256, qcclQuantSymmetric, \
        qcclRoundNearest, 0, 0ull, 0                                                \
  }

/* Bytes of the quantized chunk for count elements under spec. */
qcclResult_t qcclQuantSize(size_t count, const qcclQuantSpec_t* spec, size_t* bytes);

/* Quantizes count elements of src (qcclFloat32, qcclFloat16 or
 * qcclBfloat16) into dst, which holds qcclQuantSize(count) bytes. */
qcclResult_t qcclQuantize(const void* src, size_t count, qcclDataType_t srctype,
                          const qcclQuantSpec_t* spec, void* dst);

/* Dequantizes a chunk made by qcclQuantize into count elements of dsttype
 * (qcclFloat32, qcclFloat16 or qcclBfloat16). */
qcclResult_t qcclDequantize(const void* src, size_t count, qcclDataType_t dsttype,
                            const qcclQuantSpec_t* spec, void* dst);

/* The a-priori error bound of a quantized chunk: for round-to-nearest,
 * |x - x'| <= scale / 2 (plus f32 rounding) on every element. With
 * perBlock non-NULL, writes one bound per block (ceil(count / block)
 * floats); *maxBound gets the largest. src is the quantized chunk. */
qcclResult_t qcclQuantErrorBound(const void* src, size_t count, const qcclQuantSpec_t* spec,
                                 float* perBlock, float* maxBound);

/* ------------------------------------------------------------------------
 * ZeRO++ collectives (docs/ZEROPP.md): quantized weight all-gather (qwZ),
 * secondary weight shards gathered inside the node (hpZ), and the
 * hierarchical quantized gradient reduce-scatter (qgZ). Data types:
 * qcclFloat32, qcclFloat16, qcclBfloat16. Quantization follows wire format
 * v1 (docs/QUANT.md); scales travel inline, so each hop is one message per
 * peer. Results are bitwise identical on every rank and every run (fixed
 * reduction order; stochastic rounding is keyed by (seed, rank, global
 * element index)). Across hosts the hops are two-level: inside the node
 * (shared memory) and between ranks of equal local index (the network).
 * The calls may be made inside qcclGroupStart / qcclGroupEnd: consecutive
 * calls of the same kind, communicator, data type and quantization are
 * then fused into one bucket (one message per peer and hop for them all).
 * stream must be NULL.
 * ------------------------------------------------------------------------ */

/* qwZ. Each rank quantizes its sendcount elements under *spec, one
 * all-gather moves the quantized chunks, and every rank dequantizes all of
 * them into recvbuff (nranks * sendcount elements of datatype; rank i's at
 * offset i * sendcount). Every rank's block, its own included, is the
 * dequantized value, so recvbuff is the same on every rank. In place if
 * sendbuff == recvbuff + rank * sendcount. spec->rank is ignored (the
 * stochastic stream is the rank in comm). Any count (tail blocks are
 * padded, never dropped). Counted under qcclStatAllGatherQ. */
qcclResult_t qcclAllGatherQ(const void* sendbuff, void* recvbuff, size_t sendcount,
                            qcclDataType_t datatype, const qcclQuantSpec_t* spec, qcclComm_t comm,
                            qcclStream_t stream);

/* hpZ: a secondary weight shard. It holds, on each rank, the slice of the
 * gathered tensor (nranks * sendcount elements) for its local index l in
 * its node of L ranks: elements [l * P, (l + 1) * P) with P = ceil(nranks *
 * sendcount / L), 1/L of the tensor. It is filled by a forward gather
 * (qcclAllGatherQSecondary) and read by the node-local gather
 * (qcclSecondaryAllGather), which moves no byte between nodes. Every fill
 * records a caller's generation number and every node gather names the
 * generation it wants: a shard of another generation, an invalidated one
 * or one never filled, on any rank of the node, makes the node gather
 * fail with qcclInvalidUsage on every rank of the node (never a silent
 * read of stale weights). Pass a number that changes whenever the weights
 * change (a counter bumped by every optimizer step and every checkpoint
 * load), or call qcclSecondaryInvalidate after changing them. */
typedef struct qcclSecondary* qcclSecondary_t;

/* Creates an empty secondary shard for gathers of sendcount elements of
 * datatype on comm. storage NULL keeps the shard in datatype; a spec keeps
 * it quantized under that spec (int8: half the memory of bf16), at the cost
 * of one more rounding (the errors add). Local. */
qcclResult_t qcclSecondaryCreate(qcclComm_t comm, size_t sendcount, qcclDataType_t datatype,
                                 const qcclQuantSpec_t* storage, qcclSecondary_t* secondary);

/* qcclAllGatherQ that also fills secondary with this rank's slice of the
 * result, tagged with generation. spec may be NULL: a plain (full
 * precision) gather that fills the secondary shard. sendcount and datatype
 * must be those of qcclSecondaryCreate. */
qcclResult_t qcclAllGatherQSecondary(const void* sendbuff, void* recvbuff, size_t sendcount,
                                     qcclDataType_t datatype, const qcclQuantSpec_t* spec,
                                     qcclSecondary_t secondary, unsigned long long generation,
                                     qcclComm_t comm, qcclStream_t stream);

/* The backward gather of hpZ: all-gathers the secondary shards of the
 * node's ranks into recvbuff (nranks * sendcount elements of the shard's
 * datatype), inside the node only. Collective over the ranks of the node
 * (in practice over all ranks of comm, which all call it). Fails with
 * qcclInvalidUsage, naming the rank, unless every shard of the node holds
 * `generation`. Counted under qcclStatNodeAllGather. */
qcclResult_t qcclSecondaryAllGather(qcclSecondary_t secondary, void* recvbuff,
                                    unsigned long long generation, qcclStream_t stream);

/* Marks the shard empty: node gathers fail until the next fill. Local. */
qcclResult_t qcclSecondaryInvalidate(qcclSecondary_t secondary);

/* Frees the shard (NULL is allowed). Local. */
qcclResult_t qcclSecondaryDestroy(qcclSecondary_t secondary);

/* qgZ configuration; start from QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER.
 * intra: the hop inside the node (default int8, B = 256); inter: the hop
 * between nodes (default int4, B = 256). They may differ in bits, mode and
 * rounding but must share block, rotate and seed (the node sums are taken
 * in the rotated domain). On one host only intra is used; on hosts with
 * unequal numbers of ranks the call is one hop across all ranks under
 * inter. Error feedback (errorFeedback = 1) keeps the error of the
 * inter-node quantization in a residual and adds it to the next call's sum
 * (EF21 / LoCo style): in residual if not NULL (residualCount floats, from
 * qcclReduceScatterQResidualCount, zero before the first call; owned by the
 * caller, one per tensor), else in a residual owned by comm, one per
 * residualTag. It has no effect where there is no inter-node hop. */
typedef struct qcclReduceScatterQConfig_v1 {
  size_t size;          /* set by the initializer */
  unsigned int magic;   /* set by the initializer */
  unsigned int version; /* set by the initializer */
  qcclQuantSpec_t intra;
  qcclQuantSpec_t inter;
  int errorFeedback;    /* 0 (default) or 1 */
  float* residual;      /* caller-owned residual, or NULL */
  size_t residualCount; /* its length in floats */
  int residualTag;      /* which comm-owned residual (when residual is NULL) */
} qcclReduceScatterQConfig_t;

#define QCCL_REDUCESCATTERQ_CONFIG_MAGIC 0x71c0de02u
#define QCCL_REDUCESCATTERQ_CONFIG_INITIALIZER                                \
  {                                                                           \
    sizeof(qcclReduceScatterQConfig_t), QCCL_REDUCESCATTERQ_CONFIG_MAGIC, 1u, \
        QCCL_QUANT_SPEC_INITIALIZER,                                          \
        {sizeof(qcclQuantSpec_t), QCCL_QUANT_SPEC_MAGIC, 1u, 4,    256,       \
         qcclQuantSymmetric,      qcclRoundNearest,      0,  0ull, 0},        \
        0, NULL, 0, 0                                                         \
  }

/* qgZ. sendbuff holds nranks * recvcount elements; block i of the sum over
 * all ranks lands in recvbuff of rank i (recvcount elements), as in
 * qcclReduceScatter. Across hosts: each rank quantizes (intra) the slices
 * for the ranks of each local index, one all-to-all inside the node, a
 * fused dequantize + f32 sum + requantize (inter), one all-to-all among the
 * ranks of equal local index, dequantize + final f32 sum; the two hops are
 * pipelined in pieces. op: qcclSum or qcclAvg (the sum divided by nranks).
 * cfg NULL takes the defaults (8 bits inside, 4 across). In place if
 * recvbuff == sendbuff + rank * recvcount. Counted under
 * qcclStatReduceScatterQ. Range: results are finite for inputs below
 * 2^126 / nranks (2^126 / (nranks * block) rotated); past it a sum that
 * reaches 2^126 before a quantization gives NaN, one past the f32 range
 * Inf (docs/ZEROPP.md, "Range"). */
qcclResult_t qcclReduceScatterQ(const void* sendbuff, void* recvbuff, size_t recvcount,
                                qcclDataType_t datatype, qcclRedOp_t op,
                                const qcclReduceScatterQConfig_t* cfg, qcclComm_t comm,
                                qcclStream_t stream);

/* Floats of the caller-owned error-feedback residual of qcclReduceScatterQ
 * (and of qcclAllReduceQ, with recvcount = ceil(count / nranks)) for this
 * recvcount and cfg on comm (0 where there is no inter-node hop). Local. */
qcclResult_t qcclReduceScatterQResidualCount(qcclComm_t comm, size_t recvcount,
                                             const qcclReduceScatterQConfig_t* cfg, size_t* count);

/* Quantized all-reduce: qcclReduceScatterQ of the count elements (padded to
 * a multiple of nranks), then a qcclAllGatherQ of the reduced shards under
 * cfg->inter. recvbuff is the same on every rank. In place if sendbuff ==
 * recvbuff. Counted under qcclStatAllReduceQ. Range as qcclReduceScatterQ:
 * inputs below 2^126 / nranks (the gathered sums are quantized again). */
qcclResult_t qcclAllReduceQ(const void* sendbuff, void* recvbuff, size_t count,
                            qcclDataType_t datatype, qcclRedOp_t op,
                            const qcclReduceScatterQConfig_t* cfg, qcclComm_t comm,
                            qcclStream_t stream);

/* Policy: makes plain calls of `collective` (qcclStatAllGather,
 * qcclStatReduceScatter or qcclStatAllReduce) on comm quantized, without
 * changing the caller, when the call is of f32, f16 or bf16 (and, for the
 * reductions, of qcclSum or qcclAvg) and its full buffer (nranks * count
 * elements for the gather and reduce-scatter, count for the all-reduce) is
 * at least minBytes. AllGather becomes qcclAllGatherQ under *spec;
 * ReduceScatter becomes qcclReduceScatterQ with spec across nodes and an
 * int8 hop (same block and rotation) inside; AllReduce becomes
 * qcclAllReduceQ likewise. Such calls are counted under the quantized
 * collective's slot, the others under the plain one. spec NULL makes the
 * collective plain again (also over QCCL_POLICY). Every rank of comm must
 * set the same policy. Local. QCCL_POLICY (docs/ENV.md) sets the same for
 * every communicator, e.g. "allgather:int8:b256,reducescatter:int4:b128". */
qcclResult_t qcclCommSetPolicy(qcclComm_t comm, qcclStatColl_t collective,
                               const qcclQuantSpec_t* spec, size_t minBytes);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QCCL_H_ */
