#include <cstdio>
__global__ void k(int *out) {
  extern __shared__ char s[];
  unsigned smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  if (threadIdx.x == 0) out[blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)] = smid;
  s[threadIdx.x] = 0;
  long long t0 = clock64(); while (clock64() - t0 < 200000) {}
}
int main() {
  int *d; cudaMalloc(&d, 4096 * 4); int h[4096];
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 72 * 1024);
  dim3 grids[] = {dim3(8), dim3(2, 4), dim3(4), dim3(16), dim3(64), dim3(128), dim3(132)};
  for (dim3 g : grids) {
    k<<<g, 256, 72 * 1024>>>(d); cudaDeviceSynchronize();
    int n = g.x * g.y * g.z; cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost);
    printf("grid %d,%d,%d:", g.x, g.y, g.z); for (int i = 0; i < n; ++i) printf(" %d", h[i]); printf("\n");
  }
}
