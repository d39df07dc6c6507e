#!/usr/bin/env python3
# bench/host_load_ceilings.py — what the host allows weight loading, measured without minfer: a file in the
# page cache (/dev/shm) to the GPU by each route a loader could take, as GB/s of the file's bytes.
#   pinned_h2d            the copy engine from page-locked memory (the ceiling of every route)
#   pread_T*_host / _h2d  pread into 4 page-locked 64 MB slots on T threads, alone / with the copies overlapped
#   mmap_memcpy_T*_host   memcpy from a fresh mapping of the file (page faults included) on T threads
#   register_T*           cudaHostRegister (read-only) of the mapped file in 256 MB pieces on T threads, then
#                         registered_h2d_T*: the copy engine straight from the registered file pages
#   populate_T16, register_populated   the same with the mapping's pages faulted in first by 16 threads
#   register_anon_populated, hostalloc_256MB_ms   anonymous memory registered; cudaHostAlloc of 256 MB
# Run on the GPU machine (PyTorch, CUDA): PROBE_GB=2.2 python3 bench/host_load_ceilings.py > out.json
import os, mmap, time, ctypes, json
import numpy as np, torch
from concurrent.futures import ThreadPoolExecutor

path = "/dev/shm/probe.bin"
GB = 1 << 30
size = int(float(os.environ.get("PROBE_GB", "2.2")) * GB) // (1 << 20) * (1 << 20)
if not os.path.exists(path) or os.path.getsize(path) != size:
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        for off in range(0, size, 256 << 20):
            f.write(rng.integers(0, 255, min(256 << 20, size - off), dtype=np.uint8).tobytes())
res = {"bytes": size, "cpus": os.cpu_count()}
cudart = ctypes.CDLL("/usr/local/cuda/lib64/libcudart.so")
torch.cuda.init(); dev = torch.empty(size, dtype=torch.uint8, device="cuda")
devp = dev.data_ptr()
stream = torch.cuda.Stream()
def sync(): torch.cuda.synchronize()

def h2d(src_ptr, dst_off, n, s):
    r = cudart.cudaMemcpyAsync(ctypes.c_void_p(devp + dst_off), ctypes.c_void_p(src_ptr), ctypes.c_size_t(n), 1, ctypes.c_void_p(s.cuda_stream))
    assert r == 0, r

# 1. pinned ceiling
pin = torch.empty(256 << 20, dtype=torch.uint8, pin_memory=True)
for rep in range(2):
    sync(); t = time.perf_counter()
    for off in range(0, size, 256 << 20):
        h2d(pin.data_ptr(), off, min(256 << 20, size - off), stream)
    stream.synchronize(); dt = time.perf_counter() - t
res["pinned_h2d_GBps"] = size / dt / 1e9

chunk = 64 << 20
slots = [torch.empty(chunk, dtype=torch.uint8, pin_memory=True) for _ in range(4)]
slotnp = [s.numpy() for s in slots]

# 2. pread into pinned slots, T threads, with / without H2D overlap
fd = os.open(path, os.O_RDONLY)
def pread_into(buf, off, n):
    mv = memoryview(buf)[:n]
    got = 0
    while got < n:
        got += os.preadv(fd, [mv[got:]], off + got)
for T in (4, 8, 16):
    pool = ThreadPoolExecutor(T)
    for overlap in (False, True):
        events = [None] * 4
        sync(); t = time.perf_counter()
        for k, off in enumerate(range(0, size, chunk)):
            i = k % 4; n = min(chunk, size - off)
            if events[i] is not None: events[i].synchronize()
            piece = (n + T - 1) // T
            list(pool.map(lambda j: pread_into(slotnp[i][j*piece:], off + j*piece, max(0, min(piece, n - j*piece))), range(T)))
            if overlap:
                h2d(slots[i].data_ptr(), off, n, stream)
                e = torch.cuda.Event(); e.record(stream); events[i] = e
        stream.synchronize(); dt = time.perf_counter() - t
        res[f"pread_T{T}_{'h2d' if overlap else 'host'}_GBps"] = size / dt / 1e9
    pool.shutdown()

# 3. mmap + memcpy into pinned (today's path), fresh mapping each time
for T in (8, 16):
    pool = ThreadPoolExecutor(T)
    mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    src = np.frombuffer(mm, dtype=np.uint8)
    sync(); t = time.perf_counter()
    for k, off in enumerate(range(0, size, chunk)):
        i = k % 4; n = min(chunk, size - off); piece = (n + T - 1) // T
        list(pool.map(lambda j: np.copyto(slotnp[i][j*piece:min(n, (j+1)*piece)], src[off+j*piece:off+min(n, (j+1)*piece)]), range(T)))
    dt = time.perf_counter() - t
    res[f"mmap_memcpy_T{T}_host_GBps"] = size / dt / 1e9
    del src; mm.close(); pool.shutdown()

# 4. register the mapped file (read-only) and DMA straight from it
for T in (1, 8, 16):
    mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    base = np.frombuffer(mm, dtype=np.uint8).ctypes.data
    regchunk = 256 << 20
    def reg(off):
        n = min(regchunk, size - off)
        return cudart.cudaHostRegister(ctypes.c_void_p(base + off), ctypes.c_size_t(n), 8)  # cudaHostRegisterReadOnly
    t = time.perf_counter()
    with ThreadPoolExecutor(T) as pool:
        codes = list(pool.map(reg, range(0, size, regchunk)))
    treg = time.perf_counter() - t
    res[f"register_T{T}_codes"] = sorted(set(codes))
    res[f"register_T{T}_GBps"] = size / treg / 1e9
    if all(c == 0 for c in codes):
        sync(); t = time.perf_counter()
        for off in range(0, size, regchunk):
            h2d(base + off, off, min(regchunk, size - off), stream)
        stream.synchronize(); res[f"registered_h2d_T{T}_GBps"] = size / (time.perf_counter() - t) / 1e9
        for off in range(0, size, regchunk): cudart.cudaHostUnregister(ctypes.c_void_p(base + off))
    mm.close()

# 5. pipelined register + DMA: register chunk k+1 (threads) while chunk k copies
T = 8; regchunk = 64 << 20
mm = mmap.mmap(fd, size, prot=mmap.PROT_READ); base = np.frombuffer(mm, dtype=np.uint8).ctypes.data
sync(); t = time.perf_counter()
with ThreadPoolExecutor(T) as pool:
    offs = list(range(0, size, regchunk))
    futs = [pool.submit(lambda o: cudart.cudaHostRegister(ctypes.c_void_p(base + o), ctypes.c_size_t(min(regchunk, size - o)), 8), o) for o in offs]
    for o, f in zip(offs, futs):
        assert f.result() == 0
        h2d(base + o, o, min(regchunk, size - o), stream)
    stream.synchronize()
res["register_pipelined_T8_GBps"] = size / (time.perf_counter() - t) / 1e9
for o in offs: cudart.cudaHostUnregister(ctypes.c_void_p(base + o))
# check correctness of last copy
host = np.fromfile(path, dtype=np.uint8, count=1 << 20, offset=size - (1 << 20))
res["registered_copy_ok"] = bool((dev[size - (1 << 20):].cpu().numpy() == host).all())

# 6. populate the mapping first (16 threads touching each page), then register
mm = mmap.mmap(fd, size, prot=mmap.PROT_READ); arr = np.frombuffer(mm, dtype=np.uint8); base = arr.ctypes.data
t = time.perf_counter()
def touch(off):
    n = min(64 << 20, size - off)
    return int(arr[off:off + n:4096].sum())
with ThreadPoolExecutor(16) as pool: list(pool.map(touch, range(0, size, 64 << 20)))
res["populate_T16_GBps"] = size / (time.perf_counter() - t) / 1e9
t = time.perf_counter()
r = cudart.cudaHostRegister(ctypes.c_void_p(base), ctypes.c_size_t(size), 8)
res["register_populated_GBps"] = size / (time.perf_counter() - t) / 1e9
res["register_populated_code"] = r
cudart.cudaHostUnregister(ctypes.c_void_p(base))
# 7. register of anonymous memory (no file) for comparison, and cudaHostAlloc speed
anon = np.empty(size, dtype=np.uint8); anon[::4096] = 1
t = time.perf_counter(); r = cudart.cudaHostRegister(ctypes.c_void_p(anon.ctypes.data), ctypes.c_size_t(size), 0)
res["register_anon_populated_GBps"] = size / (time.perf_counter() - t) / 1e9
cudart.cudaHostUnregister(ctypes.c_void_p(anon.ctypes.data))
t = time.perf_counter(); p = ctypes.c_void_p(); cudart.cudaHostAlloc(ctypes.byref(p), ctypes.c_size_t(256 << 20), 0)
res["hostalloc_256MB_ms"] = (time.perf_counter() - t) * 1e3
print(json.dumps(res, indent=1))
