// How a kernel boundary's cost grows with the grid: a CUDA graph of 400 dependent kernels under programmatic
// dependent launch, every kernel with the same grid of 128-thread blocks (12: an attention; 132; 288: GPT-2's qkv
// gemv; 768: its up gemv; 1536), each thread reading one float the kernel before wrote and writing one.
// griddepcontrol.wait against no wait at all (racy on purpose: the launch and block-scheduling cost alone).
// Session 37, after boundary.cu: is a 768-block gemv's boundary dearer than a 192-block one's?
//   nvcc -O3 -arch=sm_90a boundary_grids.cu -o boundary_grids && ./boundary_grids
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void __launch_bounds__(128) step(const float *in, float *out, int wait) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (wait) asm volatile("griddepcontrol.wait;" ::: "memory");
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = __ldcg(in + i) + 1.f;
}

int main() {
  const int kChain = 400, kMaxBlocks = 1536;
  float *buf[2];
  for (auto &b : buf) CHECK(cudaMalloc(&b, kMaxBlocks * 128 * sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int blocks : {12, 132, 288, 768, 1536}) {
    for (int wait = 1; wait >= 0; --wait) {
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      for (int k = 0; k < kChain; ++k) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(blocks);
        cfg.blockDim = dim3(128);
        cfg.stream = s;
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        CHECK(cudaLaunchKernelEx(&cfg, step, (const float *)buf[k % 2], buf[(k + 1) % 2], wait));
      }
      CHECK(cudaStreamEndCapture(s, &graph));
      CHECK(cudaGraphInstantiate(&exec, graph, 0));
      float best = 1e30f;
      for (int rep = 0; rep < 7; ++rep) {
        CHECK(cudaMemsetAsync(buf[0], 0, kMaxBlocks * 128 * sizeof(float), s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaEventRecord(e0, s));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaEventRecord(e1, s));
        CHECK(cudaStreamSynchronize(s));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (rep > 0 && ms < best) best = ms;
      }
      float last;
      CHECK(cudaMemcpy(&last, buf[kChain % 2], sizeof last, cudaMemcpyDeviceToHost));
      printf("graph, %4d blocks  %-20s %6.3f us a kernel  (last value %.0f of %d)\n", blocks,
             wait ? "griddepcontrol.wait" : "no wait (racy)", best * 1000.f / kChain, last, kChain);
      CHECK(cudaGraphExecDestroy(exec));
      CHECK(cudaGraphDestroy(graph));
    }
  }
  return 0;
}
