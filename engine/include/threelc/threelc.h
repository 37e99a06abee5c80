/* threelc public C ABI: the engine's operations. Stable: functions are only added, structs only
 * grow at their end (callers fill them with the *_init functions first).
 *
 * Model (Horovod's): every rank calls threelc_init(); framework threads submit operations that
 * return a handle at once; one background thread per process negotiates with the other ranks
 * which operations every rank has submitted, fuses them and runs them in the same order
 * everywhere; the caller polls or waits on the handle, then releases it.
 *
 * Errors: functions return THREELC_OK (0) or a negative THREELC_E* code (or, for submissions,
 * a handle > 0 or a negative code); threelc_last_error() gives the calling thread's message for
 * the last failing call, threelc_handle_error() the message of a failed operation. */
#ifndef THREELC_THREELC_H_
#define THREELC_THREELC_H_

#include <stddef.h>
#include <stdint.h>

#include "threelc/codec.h"       /* threelc_dtype */
#include "threelc/error_codes.h" /* THREELC_OK, THREELC_E* */

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes (THREELC_OK, THREELC_EINVAL, ..., THREELC_EINTERNAL): threelc/error_codes.h, the
 * one enum of every code. */

/* Reduction of allreduce / reducescatter. */
typedef enum threelc_reduce_op {
  THREELC_OP_SUM = 0,
  THREELC_OP_AVERAGE = 1, /* the sum divided by the number of ranks after decoding */
  THREELC_OP_MIN = 2,
  THREELC_OP_MAX = 3,
  THREELC_OP_PRODUCT = 4
} threelc_reduce_op;

/* Compression of one allreduce. DEFAULT follows THREELC_COMPRESSION. Only float tensors of at
 * least THREELC_MIN_COMPRESS_BYTES with SUM or AVERAGE are ever compressed. */
typedef enum threelc_compression {
  THREELC_COMPRESSION_DEFAULT = 0,
  THREELC_COMPRESSION_NONE = 1,
  THREELC_COMPRESSION_3LC = 2
} threelc_compression;

#define THREELC_MAX_DIMS 8
#define THREELC_DEVICE_CPU (-1)

typedef int64_t threelc_handle; /* > 0 */

/* A tensor: dense, row-major, `shape[0..ndim)` elements of `dtype`. */
typedef struct threelc_tensor {
  const char* name; /* identifies the tensor across ranks; NULL or "": the engine numbers the
                       operation (the n-th unnamed call of its kind on every rank) */
  int dtype;        /* threelc_dtype */
  int ndim;         /* 0 .. THREELC_MAX_DIMS; 0 is a scalar */
  const int64_t* shape;
  const void* data; /* input */
  void* output;     /* allreduce and broadcast: the result, same shape (may equal data);
                       allgather, reducescatter and alltoall: unused (see threelc_result) */
  int device;       /* THREELC_DEVICE_CPU, or a CUDA device ordinal (allreduce only) */
  void* stream;     /* cudaStream_t the data is ready on (CUDA tensors), else NULL */
} threelc_tensor;

/* Per-call options; threelc_options_init() sets the defaults shown. */
typedef struct threelc_options {
  int op;                /* threelc_reduce_op, THREELC_OP_SUM */
  double prescale;       /* multiply the input before reducing, 1.0 */
  double postscale;      /* multiply the result after reducing (and averaging), 1.0 */
  int compression;       /* threelc_compression, THREELC_COMPRESSION_DEFAULT */
  float sparsity;        /* 3LC sparsity multiplier s in [1, 2); 0 follows THREELC_SPARSITY */
  int root_rank;         /* broadcast: the (job) rank whose data everyone receives, 0 */
  const int64_t* splits; /* alltoall: rows sent to each rank (`nsplits` == size), or NULL
                            for equal parts of the first dimension */
  int nsplits;
  int process_set; /* the process set the operation runs in (threelc_add_process_set), 0: every
                      rank of the job. Among a set's members, rank, size and the splits are the
                      set's (member i = its i-th lowest job rank); root_rank stays a job rank
                      and must be a member. Only members may submit. 0 */
} threelc_options;

void threelc_tensor_init(threelc_tensor* tensor);
void threelc_options_init(threelc_options* options);

/* Joins the job described by the environment (threelcrun, mpirun, srun or torchrun; see
 * docs/CONFIGURATION.md). Every malformed THREELC_* variable is refused here, by name.
 * Calling it again while initialized is a no-op; after threelc_shutdown() it joins anew. */
int threelc_init(void);
/* Stops the background thread: operations still pending fail with THREELC_ESHUTDOWN. With
 * THREELC_STATS=1 prints this rank's statistics; closes the timeline. No-op when not
 * initialized. */
int threelc_shutdown(void);
int threelc_is_initialized(void);

/* GPU support; neither needs threelc_init(). threelc_cuda_built(): 1 when this library was
 * built with CUDA (the CUDA 3LC codec and device allreduce). threelc_cuda_available(): 1 when
 * threelc_allreduce takes CUDA tensors here (built with CUDA and a device visible); 0
 * otherwise, with the reason in threelc_last_error(). A CUDA tensor has device = its ordinal
 * and stream = the cudaStream_t its data is ready on (NULL: the legacy default stream); the
 * engine waits for that stream's work at submission, and the handle completes once the output
 * is written. Other collectives take host tensors only. */
int threelc_cuda_built(void);
int threelc_cuda_available(void);
/* NCCL's version code (ncclGetVersion, e.g. 21803) when uncompressed allreduces of CUDA
 * tensors run over NCCL here: built with CUDA and nccl.h, THREELC_NCCL on, and the library
 * (THREELC_NCCL_LIBRARY, else libnccl.so.2) loads. Otherwise 0, with the reason in
 * threelc_last_error(); a malformed THREELC_* variable gives its refusal code. Needs no
 * threelc_init(). */
int threelc_nccl_version(void);

/* Identity; -1 when not initialized. local_*: ranks on this host; cross_*: this host's index
 * among the hosts and the number of hosts (ranks with the same local_rank form a cross group). */
int threelc_rank(void);
int threelc_size(void);
int threelc_local_rank(void);
int threelc_local_size(void);
int threelc_cross_rank(void);
int threelc_cross_size(void);
/* 1 when every host runs the same number of ranks, else 0 (hosts as cross_* groups them);
 * -1 when not initialized. */
int threelc_is_homogeneous(void);

/* Submissions. Each returns a handle > 0, or a negative code (nothing was submitted). Buffers
 * must stay valid and unchanged until the handle is done. The reductions (allreduce and its
 * alias push_pull, reducescatter) refuse a THREELC_BOOL tensor with THREELC_EINVAL; the others
 * move it. */
threelc_handle threelc_allreduce(const threelc_tensor* tensor, const threelc_options* options);
/* An alias of threelc_allreduce, for callers that know the operation by BytePS's name: the same
 * operation, run as threelc_allreduce runs it (when compressed, the 3LC push_pull algorithm or the
 * ring, as THREELC_ALLREDUCE says; otherwise the raw allreduce). */
threelc_handle threelc_push_pull(const threelc_tensor* tensor, const threelc_options* options);
threelc_handle threelc_broadcast(const threelc_tensor* tensor, const threelc_options* options);
/* Concatenates every rank's tensor along the first dimension (its length may differ). */
threelc_handle threelc_allgather(const threelc_tensor* tensor, const threelc_options* options);
/* Reduces (options->op) and leaves rank r the r-th part of the first dimension; the first
 * (dim0 % size) ranks get one row more. */
threelc_handle threelc_reducescatter(const threelc_tensor* tensor, const threelc_options* options);
/* Sends rows splits[j] of the first dimension to rank j; the result is the rows received,
 * in rank order, with the received splits. */
threelc_handle threelc_alltoall(const threelc_tensor* tensor, const threelc_options* options);
threelc_handle threelc_barrier(void);
/* A barrier among the members of process set `process_set` (0: every rank). */
threelc_handle threelc_barrier_set(int process_set);
/* This rank has no more data: until every rank has joined it takes part in other ranks'
 * allreduces with the op's identity (zeros for sum) and in allgathers with no rows. The
 * result's value (threelc_result.last_joined_rank) is the rank that joined last. Join is the
 * job's: a joined rank stands in only for operations of the global process set (0); those of
 * another set wait for every one of its members, as in Horovod. */
threelc_handle threelc_join(void);

/* Process sets (Horovod's): subsets of the job's ranks that run collectives among themselves
 * (threelc_options.process_set). Set 0 is every rank. Adding and removing a set are negotiated
 * among every rank of the job: every rank calls them, in the same order, with the same
 * arguments, like a collective of set 0.
 *
 * threelc_add_process_set: `ranks` (`count` distinct job ranks, any order; sorted by the
 * engine) become a new set. Returns a handle; once it is done, threelc_result.process_set holds
 * the new set's id (1, 2, ...; ids are never reused) on every rank, and the set is usable on this
 * rank. Refused (THREELC_EINVAL, on every rank) when a set of the same ranks exists, naming it;
 * THREELC_EMISMATCH when ranks asked for different sets. */
threelc_handle threelc_add_process_set(const int* ranks, int count);
/* Removes set `id` (not 0) on every rank; its operations still pending fail with THREELC_EINVAL,
 * and later submissions in it are refused. Returns a handle (threelc_result.process_set = id). */
threelc_handle threelc_remove_process_set(int id);
/* Queries of this rank's table (a set exists here once its add's handle is done, and until its
 * removal's is). An unknown or removed id is THREELC_EINVAL with threelc_last_error() saying
 * which; THREELC_ENOTINIT before threelc_init().
 * size: the number of members. rank: this rank's index among the members, or -1 (which is
 * THREELC_EINVAL) when it is not one (threelc_process_set_included tells the two apart).
 * included: 1 when this rank is a member, 0 when not. ranks: writes the members' job ranks,
 * ascending, into out[0 .. capacity) when they fit and returns their number (the size) either
 * way. ids: writes the ids of the sets this rank knows, ascending (0 first), into
 * out[0 .. capacity) when they fit and returns their number. */
int threelc_process_set_size(int id);
int threelc_process_set_rank(int id);
int threelc_process_set_included(int id);
int threelc_process_set_ranks(int id, int* out, int capacity);
int threelc_process_set_ids(int* out, int capacity);

/* A hint: what this rank has submitted is all it will submit for now (a DDP bucket, the
 * gradients a step waits for), so the background thread negotiates it at once instead of at its
 * next cycle (THREELC_CYCLE_TIME_MS). Changes nothing else; THREELC_ENOTINIT before init. */
int threelc_flush(void);

/* 1 when the operation finished (successfully or not), 0 while pending; negative code for an
 * unknown handle. */
int threelc_poll(threelc_handle handle);
/* Waits up to timeout_ms (< 0: without limit) and returns THREELC_OK, the operation's error
 * code, or THREELC_ETIMEOUT when it is still pending. */
int threelc_wait(threelc_handle handle, int64_t timeout_ms);
/* The failed operation's message ("" while pending or after success); valid until release. */
const char* threelc_handle_error(threelc_handle handle);

/* What an operation produced, valid until its handle is released. */
typedef struct threelc_result {
  const void* data; /* allgather, reducescatter, alltoall: the result tensor (engine memory) */
  size_t bytes;
  int dtype;
  int ndim;
  int64_t shape[THREELC_MAX_DIMS];
  const int64_t* received_splits; /* alltoall: rows received from each rank (size entries) */
  int nsplits;
  int last_joined_rank; /* join */
  int process_set;      /* add_process_set: the new set's id; remove_process_set: the id removed */
} threelc_result;

/* Fills *result for a successfully finished operation. */
int threelc_handle_result(threelc_handle handle, threelc_result* result);
/* Forgets the handle (waits for nothing: release only finished operations, or the buffers of a
 * pending one must outlive it). */
int threelc_release(threelc_handle handle);

/* This rank's traffic and work since threelc_init (THREELC_STATS=1 prints more at shutdown). */
typedef struct threelc_statistics {
  uint64_t wire_bytes_sent;     /* bytes of messages this rank sent to other ranks' data channels */
  uint64_t wire_bytes_received; /* bytes of messages it received on them */
  uint64_t operations;          /* submitted operations completed (successfully or not): one per
                                 * handle, however many ran in one fused collective */
  uint64_t allreduce_bytes;     /* input bytes of the allreduces it completed */
} threelc_statistics;

int threelc_get_statistics(threelc_statistics* statistics);

/* Error feedback (3LC's residuals: one float32 buffer per compressed tensor name, per rank) for
 * checkpoints; see docs/WIRE_FORMAT.md for the blob. A job that saves every rank's residuals
 * between two steps (after waiting for one step's allreduces, before submitting the next) and
 * loads them into a fresh engine of the same size continues bit for bit as if it had never
 * stopped. Both functions may be called from any thread while operations are in flight: they
 * wait for a compressed allreduce in progress, never see one halfway, and never change the
 * residuals under one.
 *
 * Writes this rank's residuals whose names start with `prefix` (NULL or "": all) into `buffer`
 * as one blob and returns its length; when `capacity` is too small (or buffer is NULL) writes
 * nothing and returns the length needed (it may have grown by the next call: a new tensor's
 * first compressed step). Negative THREELC_E* code on error: THREELC_ENOTINIT before
 * threelc_init(), THREELC_EINVAL for a name the blob cannot hold (empty, over 4096 bytes, not
 * UTF-8), THREELC_EPEER when a compressed allreduce failed while updating the residuals. */
int64_t threelc_feedback_save(const char* prefix, void* buffer, size_t capacity);
/* Replaces this rank's residuals whose names start with `prefix` by the blob's (names under the
 * prefix that the blob lacks are dropped). Every name in the blob must start with `prefix`, and
 * the blob must have been saved by this rank of a job of this size (else THREELC_EINVAL naming
 * both); a malformed blob is THREELC_EMALFORMED naming what is wrong (offset, field).
 * THREELC_ENOTINIT before threelc_init(), THREELC_EPEER as for save. On any error nothing
 * changes. A loaded residual is used by the next compressed allreduce of its name with as many
 * elements (another element count starts from zeros, as it always does). */
int threelc_feedback_load(const char* prefix, const void* blob, size_t bytes);

/* Message of the calling thread's last failing call ("" if none). */
const char* threelc_last_error(void);

/* "major.minor.patch" of this library. */
const char* threelc_version(void);

/* One environment variable threelc reads, as its layer declares it (every layer's table:
 * engine, transport, compression). docs/CONFIGURATION.md's tables are generated from these rows.
 * The strings are static. */
typedef struct threelc_setting {
  const char* name;          /* "THREELC_CHUNK_BYTES" */
  const char* layer;         /* "engine", "transport" or "compression" */
  const char* type;          /* "bytes", "seconds", "flag", "choice", ... */
  const char* default_value; /* as a user would write it; "" = unset */
  const char* accepted;      /* the values accepted, as a refusal says it */
  const char* meaning;       /* one line of Markdown */
  const char* details;       /* the whole story in Markdown; "" when the meaning says it all */
} threelc_setting;

/* The number of variables threelc_setting_at() describes. Needs no threelc_init(). */
int threelc_setting_count(void);

/* Fills *out with variable `index`, 0 <= index < threelc_setting_count(); THREELC_EINVAL for
 * another index or a NULL out. */
int threelc_setting_at(int index, threelc_setting* out);

#ifdef __cplusplus
}
#endif

#endif /* THREELC_THREELC_H_ */
