/* dist.h — process groups (libtorch's c10d) across the Go boundary: a
 * TCPStore rendezvous and a Gloo (CPU) or NCCL (CUDA, when the build has it)
 * process group, and the collectives wfgen's runtime/dist needs.
 *
 * The conventions are shim.h's: every entry point catches all C++
 * exceptions and reports through the wf_result of the same call (WF_OK,
 * WF_ERROR or WF_OOM, the message as payload). Collectives work on host
 * memory the caller owns for the call only: it is copied into libtorch
 * tensors before the collective starts and the result is copied back only
 * when it succeeded, so a failed, timed-out or cancelled collective never
 * touches the caller's memory after the call returns, whatever libtorch's
 * threads are still doing. */
#ifndef WFGEN_TORCH_DIST_H
#define WFGEN_TORCH_DIST_H

#include <stdint.h>

#include "shim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wf_group wf_group;

/* Backends compiled into this build (a bit set). */
enum { WF_DIST_GLOO = 1, WF_DIST_NCCL = 2 };
int32_t wf_dist_backends(void);

/* Reduction operations of wf_dist_all_reduce. */
enum { WF_DIST_SUM = 0, WF_DIST_PRODUCT = 1, WF_DIST_MIN = 2, WF_DIST_MAX = 3 };

/* Joins a process group of `size` ranks as `rank`: the rank told to
 * (host_store, rank 0 unless the launcher hosts it) hosts a TCPStore at
 * host:port, every rank connects to it, and the backend (WF_DIST_GLOO or
 * WF_DIST_NCCL) rendezvouses through it under the key prefix.
 * join_timeout_ms bounds the store's connection and waits; timeout_ms is
 * the backend's timeout, for every collective.
 * device is where collectives run ("cpu" for Gloo, "cuda:N" for NCCL).
 * ifaces is a comma-separated list of network interfaces for Gloo (empty:
 * the address this host's name resolves to, else loopback). NULL with res
 * set on failure. */
wf_group* wf_dist_join(int32_t backend, const char* host, int64_t host_len, int32_t port, int32_t host_store,
                       const char* prefix, int64_t prefix_len, int32_t rank, int32_t size, int64_t join_timeout_ms,
                       int64_t timeout_ms, const char* device, int64_t device_len, const char* ifaces,
                       int64_t ifaces_len, char* out, int64_t cap, wf_result* res);
/* Leaves the group; waits for collectives libtorch still runs (at most the
 * group's timeout). */
void wf_dist_close(wf_group* g);

/* Collectives. Every rank calls the same ones in the same order with the
 * same sizes. op_id identifies the call for wf_dist_cancel; timeout_ms
 * bounds the wait for it (a wait that ends early leaves the collective
 * running inside libtorch until the group's own timeout). */

/* Reduces numel elements of dtype (shim.h's dtype codes) in data, in place. */
void wf_dist_all_reduce(wf_group* g, int64_t op_id, void* data, int32_t dtype, int64_t numel, int32_t op,
                        int64_t timeout_ms, char* out, int64_t cap, wf_result* res);
/* Copies root's nbytes of data into every rank's data. */
void wf_dist_broadcast(wf_group* g, int64_t op_id, void* data, int64_t nbytes, int32_t root, int64_t timeout_ms,
                       char* out, int64_t cap, wf_result* res);
/* Writes every rank's nbytes of in, in rank order, to all (size * nbytes). */
void wf_dist_all_gather(wf_group* g, int64_t op_id, const void* in, int64_t nbytes, void* all, int64_t timeout_ms,
                        char* out, int64_t cap, wf_result* res);
/* Like wf_dist_all_gather, on root only: all is NULL on the other ranks. */
void wf_dist_gather(wf_group* g, int64_t op_id, const void* in, int64_t nbytes, void* all, int32_t root,
                    int64_t timeout_ms, char* out, int64_t cap, wf_result* res);
/* Makes the wait of collective op_id, in progress or about to start, end
 * with an error. */
void wf_dist_cancel(wf_group* g, int64_t op_id);

#ifdef __cplusplus
}
#endif

#endif
