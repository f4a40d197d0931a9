package shim

// Process groups (dist.cpp): thin wrappers, like shim.go's. USE_C10D_GLOO
// makes libtorch's ProcessGroupGloo.hpp declare its classes; without it the
// header is empty. Gloo's own headers come from Debian's libgloo-dev.

/*
#cgo CPPFLAGS: -DUSE_C10D_GLOO
#include <stdlib.h>
#include "dist.h"
*/
import "C"

import "unsafe"

// Backends compiled into the shim (bits of DistBackends).
const (
	// DistGloo is the Gloo backend (CPU).
	DistGloo = int(C.WF_DIST_GLOO)
	// DistNCCL is the NCCL backend (CUDA; only in builds with USE_C10D_NCCL).
	DistNCCL = int(C.WF_DIST_NCCL)
)

// Reduction operations of DistAllReduce.
const (
	DistSum     = int(C.WF_DIST_SUM)
	DistProduct = int(C.WF_DIST_PRODUCT)
	DistMin     = int(C.WF_DIST_MIN)
	DistMax     = int(C.WF_DIST_MAX)
)

// distOut is the message buffer of the process-group calls.
const distOut = 1024

// Group is a joined process group in C++ memory; the zero Group is none.
type Group struct{ p *C.wf_group }

// Valid reports whether g refers to a group.
func (g Group) Valid() bool { return g.p != nil }

// DistBackends returns the backends compiled into the shim (DistGloo,
// DistNCCL bits).
func DistBackends() int { return int(C.wf_dist_backends()) }

// DistJoin joins a process group (see wf_dist_join).
func DistJoin(backend int, host string, port int, hostStore bool, prefix string, rank, size int, joinTimeoutMS, timeoutMS int64, device, ifaces string) (Group, Result) {
	var res C.wf_result
	out := make([]byte, distOut)
	g := C.wf_dist_join(C.int32_t(backend), sptr(host), C.int64_t(len(host)), C.int32_t(port), b32(hostStore), sptr(prefix),
		C.int64_t(len(prefix)), C.int32_t(rank), C.int32_t(size), C.int64_t(joinTimeoutMS), C.int64_t(timeoutMS), sptr(device),
		C.int64_t(len(device)), sptr(ifaces), C.int64_t(len(ifaces)), ptr(out), C.int64_t(len(out)), &res)
	return Group{g}, finish(&res, out)
}

// DistClose leaves the group and frees it.
func DistClose(g Group) { C.wf_dist_close(g.p) }

// DistCancel ends the wait of collective opID with an error.
func DistCancel(g Group, opID int64) { C.wf_dist_cancel(g.p, C.int64_t(opID)) }

func dptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// DistAllReduce reduces numel elements of dtype (a dtype code) in data, in place.
func DistAllReduce(g Group, opID int64, data []byte, dtype int, numel int64, op int, timeoutMS int64) Result {
	var res C.wf_result
	out := make([]byte, distOut)
	C.wf_dist_all_reduce(g.p, C.int64_t(opID), dptr(data), C.int32_t(dtype), C.int64_t(numel), C.int32_t(op),
		C.int64_t(timeoutMS), ptr(out), C.int64_t(len(out)), &res)
	return finish(&res, out)
}

// DistBroadcast copies root's data into every rank's data (same length).
func DistBroadcast(g Group, opID int64, data []byte, root int, timeoutMS int64) Result {
	var res C.wf_result
	out := make([]byte, distOut)
	C.wf_dist_broadcast(g.p, C.int64_t(opID), dptr(data), C.int64_t(len(data)), C.int32_t(root),
		C.int64_t(timeoutMS), ptr(out), C.int64_t(len(out)), &res)
	return finish(&res, out)
}

// DistAllGather writes every rank's in, in rank order, to all (size*len(in)).
func DistAllGather(g Group, opID int64, in, all []byte, timeoutMS int64) Result {
	var res C.wf_result
	out := make([]byte, distOut)
	C.wf_dist_all_gather(g.p, C.int64_t(opID), dptr(in), C.int64_t(len(in)), dptr(all), C.int64_t(timeoutMS),
		ptr(out), C.int64_t(len(out)), &res)
	return finish(&res, out)
}

// DistGather is DistAllGather to root only; all is nil on the other ranks.
func DistGather(g Group, opID int64, in, all []byte, root int, timeoutMS int64) Result {
	var res C.wf_result
	out := make([]byte, distOut)
	C.wf_dist_gather(g.p, C.int64_t(opID), dptr(in), C.int64_t(len(in)), dptr(all), C.int32_t(root),
		C.int64_t(timeoutMS), ptr(out), C.int64_t(len(out)), &res)
	return finish(&res, out)
}
