// What one kernel boundary costs on a chain of dependent kernels: griddepcontrol.wait (programmatic dependent
// launch) against a counter in global memory (each block adds 1 with release after its stores; the next
// kernel's blocks spin with acquire loads until the whole grid before has added), against no wait at all (a
// lower bound, racy on purpose). Each kernel: every thread reads one float the kernel before wrote, adds 1,
// writes it. Session 37, to decide whether counters could replace the hardware's grid-completion path.
//   nvcc -O3 -arch=sm_90a boundary.cu -o boundary && ./boundary
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__device__ __forceinline__ unsigned ldAcquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void redRelease(unsigned *p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// mode 0: griddepcontrol.wait; 1: counters; 2: no wait (racy lower bound); 3: counters, spin without sleep
__global__ void __launch_bounds__(128) step(const float *in, float *out, const unsigned *ready, unsigned *done,
                                            unsigned expect, int mode) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (mode == 0) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (mode == 1 || mode == 3) {
    if (threadIdx.x == 0)
      while (ldAcquire(ready) < expect)
        if (mode == 1) __nanosleep(32);
    __syncthreads();
  }
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = __ldcg(in + i) + 1.f;
  if (mode == 1 || mode == 3) {
    __syncthreads();
    if (threadIdx.x == 0) redRelease(done, 1);
  }
}

int main() {
  const int kChain = 400, kMaxBlocks = 132;
  float *buf[2];
  unsigned *ctr;
  for (auto &b : buf) CHECK(cudaMalloc(&b, kMaxBlocks * 128 * sizeof(float)));
  CHECK(cudaMalloc(&ctr, (kChain + 1) * sizeof(unsigned)));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const char *names[] = {"griddepcontrol.wait", "counters (nanosleep 32)", "no wait (racy bound)", "counters (busy spin)"};
  int grids[][2] = {{132, 132}, {4, 132}, {66, 4}};
  for (auto &g : grids) {
    for (int mode = 0; mode < 4; ++mode) {
      float best = 1e30f;
      for (int rep = 0; rep < 7; ++rep) {
        CHECK(cudaMemsetAsync(ctr, 0, (kChain + 1) * sizeof(unsigned), s));
        CHECK(cudaMemsetAsync(buf[0], 0, kMaxBlocks * 128 * sizeof(float), s));
        unsigned first = g[1]; // the first kernel finds its counter full
        CHECK(cudaMemcpyAsync(ctr, &first, sizeof first, cudaMemcpyHostToDevice, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaEventRecord(e0, s));
        for (int k = 0; k < kChain; ++k) {
          const int blocks = g[k % 2], before = k == 0 ? g[1] : g[(k + 1) % 2];
          cudaLaunchConfig_t cfg = {};
          cfg.gridDim = dim3(blocks);
          cfg.blockDim = dim3(128);
          cfg.stream = s;
          cudaLaunchAttribute attr;
          attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
          attr.val.programmaticStreamSerializationAllowed = 1;
          cfg.attrs = &attr;
          cfg.numAttrs = 1;
          CHECK(cudaLaunchKernelEx(&cfg, step, (const float *)buf[k % 2], buf[(k + 1) % 2], (const unsigned *)(ctr + k),
                                   ctr + k + 1, (unsigned)before, mode));
        }
        CHECK(cudaEventRecord(e1, s));
        CHECK(cudaStreamSynchronize(s));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (rep > 0 && ms < best) best = ms;
      }
      printf("grids %3d/%3d  %-26s %7.3f us a kernel\n", g[0], g[1], names[mode], best * 1000.f / kChain);
    }
  }
  // Captured in a graph, as the decode step runs: same chain, modes 0 and 1.
  for (int mode = 0; mode < 2; ++mode) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int k = 0; k < kChain; ++k) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(132);
      cfg.blockDim = dim3(128);
      cfg.stream = s;
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      CHECK(cudaLaunchKernelEx(&cfg, step, (const float *)buf[k % 2], buf[(k + 1) % 2], (const unsigned *)(ctr + k),
                               ctr + k + 1, 132u, mode));
    }
    CHECK(cudaStreamEndCapture(s, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    float best = 1e30f;
    for (int rep = 0; rep < 7; ++rep) {
      CHECK(cudaMemsetAsync(ctr, 0, (kChain + 1) * sizeof(unsigned), s));
      CHECK(cudaMemsetAsync(buf[0], 0, kMaxBlocks * 128 * sizeof(float), s));
      unsigned first = 132;
      CHECK(cudaMemcpyAsync(ctr, &first, sizeof first, cudaMemcpyHostToDevice, s));
      CHECK(cudaStreamSynchronize(s));
      CHECK(cudaEventRecord(e0, s));
      CHECK(cudaGraphLaunch(exec, s));
      CHECK(cudaEventRecord(e1, s));
      CHECK(cudaStreamSynchronize(s));
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      if (rep > 0 && ms < best) best = ms;
    }
    printf("graph, grids 132/132  %-26s %7.3f us a kernel\n", names[mode], best * 1000.f / kChain);
  }
  float check;
  CHECK(cudaMemcpy(&check, buf[kChain % 2], sizeof check, cudaMemcpyDeviceToHost));
  printf("last value %.0f (mode 1 in a graph: %d kernels each added 1)\n", check, kChain);
  return 0;
}
