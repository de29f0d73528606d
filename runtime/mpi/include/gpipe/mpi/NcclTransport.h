//===- NcclTransport.h - Pipeline transfers between GPUs of ranks -*- C++
//-*-===//
//
// The Transport for one process per pipeline device on GPUs (CudaBackend),
// launched by MPI as MpiTransport is (rank = replica * K + device). Device
// data never leaves the GPU: a send or a receive is an ncclSend/ncclRecv on
// the device's copy stream, in program order, after an event of the compute
// stream (the host does not wait). Compute waits for a receive where it is,
// and for a posted send at its wait_send (a plain send: at once). A
// boundary's sends to one peer are one ncclGroupStart/End group. The
// gradient mean over the replicas is an ncclAllReduce with ncclAvg, which
// gives every replica the same bits (a ring reduces each chunk once). The
// host-side results (losses, evaluation outputs, parameters) and the ranks'
// layout are MPI's, as in MpiTransport.
//
// A peer that dies or stalls leaves the NCCL kernels waiting; the step's
// synchronize times out (the executor's step timeout), and the transport then
// aborts its communicators (ncclCommAbort) so that the process can report
// and exit.
//
// Built when the CUDA toolkit has NCCL (docs/Distributed.md). It needs one
// GPU per rank: NCCL refuses two ranks of a communicator on one GPU.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_MPI_NCCLTRANSPORT_H
#define GPIPE_MPI_NCCLTRANSPORT_H

#include "gpipe/mpi/MpiTransport.h"

namespace gpipe::mpi {

/// The factory of EngineOptions::transport for `--device cuda` under MPI.
/// It refuses a backend without native streams (not CUDA) and a job whose
/// size is not replicas times the pipeline's devices.
runtime::device::TransportFactory ncclTransport(const MpiSession &session,
                                                MpiTransportOptions options);

} // namespace gpipe::mpi

#endif // GPIPE_MPI_NCCLTRANSPORT_H
