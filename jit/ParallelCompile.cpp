// jit/ParallelCompile.cpp — compileAll: worker processes that compile through the disk cache.
//
// Why processes: NVRTC holds process-wide locks for much of a compile, so threads barely scale. The parent
// looks every kernel up first, forks up to `jobs` workers for the misses (round-robin shares), and each
// worker compiles its share with KernelCache::getOrCompile, which publishes the cubin atomically. A worker
// sends one NUL-terminated record per kernel on its pipe — `K<item> <ms>` when compiled, `E<message>` on a
// compile error (then it exits 1) — and the parent drains every pipe (reporting progress as records arrive),
// reaps every worker, then reads the results back from the cache. Anything still missing afterwards (a worker
// could not store, a fork failed) is compiled in the parent, so the cache is an accelerator, never a
// requirement.
#include "jit/ParallelCompile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Threading.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace minfer {
namespace {

struct Worker {
  pid_t pid = -1;
  int fd = -1;                // read end of the worker's pipe
  std::vector<size_t> items;  // indices into the distinct kernels
  std::string pending;        // bytes of a record not yet complete
  std::string errors;         // NUL-separated error messages the worker sent
  int status = 0;             // from waitpid
};

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

void writeAll(int fd, llvm::StringRef data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return; // the parent is gone; nothing to report to
    data = data.drop_front(size_t(n));
  }
}

// The body of a forked worker: compile each item through the cache, report failures, never return.
[[noreturn]] void runWorker(const Worker &w, const std::vector<const KernelSource *> &kernels,
                            const Target &target, const CompileOptions &opts, KernelCache cache, int errFd) {
  int failed = 0;
  for (size_t i : w.items) {
    auto t0 = Clock::now();
    llvm::Expected<CompiledKernel> k = cache.getOrCompile(*kernels[i], target, opts);
    std::string record = k ? "K" + std::to_string(i) + " " + std::to_string(msSince(t0))
                           : "E" + llvm::toString(k.takeError());
    failed |= record[0] == 'E';
    record += '\0';
    writeAll(errFd, record);
  }
  ::close(errFd);
  // _exit: no atexit handlers or static destructors of the parent's program (test frameworks, caches), and
  // no second flush of stdio buffers inherited from the parent.
  ::_exit(failed);
}

// Reads every worker's pipe to EOF (a worker blocked on a full pipe would otherwise never exit), handing
// each complete record to `onRecord` as it arrives.
void drainPipes(std::vector<Worker> &workers, llvm::function_ref<void(Worker &, llvm::StringRef)> onRecord) {
  std::vector<pollfd> fds;
  std::vector<Worker *> owners;
  for (Worker &w : workers)
    if (w.fd >= 0) {
      fds.push_back({w.fd, POLLIN, 0});
      owners.push_back(&w);
    }
  size_t open = fds.size();
  char buf[4096]; // one pipe page at a time
  while (open > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break; // cannot wait on the pipes; waitpid below still reaps the workers
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) {
        Worker &w = *owners[i];
        w.pending.append(buf, size_t(n));
        size_t end;
        while ((end = w.pending.find('\0')) != std::string::npos) {
          onRecord(w, llvm::StringRef(w.pending).take_front(end));
          w.pending.erase(0, end + 1);
        }
        continue;
      }
      ::close(fds[i].fd);
      owners[i]->fd = -1;
      fds[i].fd = -1; // poll ignores negative descriptors
      --open;
    }
  }
  for (Worker &w : workers)
    if (w.fd >= 0) {
      ::close(w.fd);
      w.fd = -1;
    }
}

llvm::Error workerError(const Worker &w, const std::vector<const KernelSource *> &kernels) {
  if (WIFEXITED(w.status) && WEXITSTATUS(w.status) == 1 && !w.errors.empty()) {
    // Compile errors, each already naming its kernel and carrying NVRTC's log.
    llvm::Error all = llvm::Error::success();
    llvm::SmallVector<llvm::StringRef, 4> msgs;
    llvm::StringRef(w.errors).split(msgs, '\0', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef m : msgs)
      all = llvm::joinErrors(std::move(all), llvm::createStringError(llvm::inconvertibleErrorCode(), m.str()));
    return all;
  }
  std::vector<std::string> names;
  for (size_t i : w.items) names.push_back(kernels[i]->name);
  std::string how = WIFSIGNALED(w.status)
                        ? "was killed by signal " + std::to_string(WTERMSIG(w.status)) + " (" +
                              strsignal(WTERMSIG(w.status)) + ")"
                        : "exited with status " + std::to_string(WIFEXITED(w.status) ? WEXITSTATUS(w.status) : -1);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "kernel compile worker (pid %d) %s while compiling: %s", int(w.pid), how.c_str(),
                                 llvm::join(names, ", ").c_str());
}

// Forks the workers for `misses` and waits for all of them. Returns their compile errors and crashes, joined.
// Each kernel a worker compiled goes into `st.compiled` and to `progress`.
llvm::Error runWorkers(const std::vector<size_t> &misses, const std::vector<const KernelSource *> &kernels,
                       const Target &target, const CompileOptions &opts, KernelCache &cache, unsigned jobs,
                       CompileStats &st, const CompileProgressFn &progress) {
  std::vector<Worker> workers(std::min<size_t>(jobs, misses.size()));
  for (size_t i = 0; i < misses.size(); ++i) workers[i % workers.size()].items.push_back(misses[i]);

  std::fflush(nullptr); // a child must not inherit (and later flush) half-written stdio buffers
  for (Worker &w : workers) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) break; // out of descriptors: the rest compile in the parent
    pid_t pid = forkOutsideNvrtc();
    if (pid == 0) {
      KernelCache::releaseInheritedLocks(); // locks other threads of the parent hold stay theirs alone
      ::close(p[0]);
      runWorker(w, kernels, target, opts, cache, p[1]);
    }
    ::close(p[1]);
    if (pid < 0) {
      ::close(p[0]);
      break; // fork failed (process limit): the rest compile in the parent
    }
    w.pid = pid;
    w.fd = p[0];
    ++st.workers;
  }

  size_t done = 0;
  drainPipes(workers, [&](Worker &w, llvm::StringRef record) {
    if (record.consume_front("E")) {
      w.errors.append(record.data(), record.size());
      w.errors += '\0';
      return;
    }
    auto [item, ms] = record.drop_front().split(' ');
    size_t i = 0;
    double t = 0;
    if (!record.startswith("K") || item.getAsInteger(10, i) || i >= kernels.size() || !llvm::to_float(ms, t))
      return; // not a record a worker writes
    st.compiled.push_back({kernels[i]->name, t});
    if (progress) progress({kernels[i]->name, ++done, misses.size(), t, false});
  });
  llvm::Error errors = llvm::Error::success();
  for (Worker &w : workers) {
    if (w.pid < 0) continue;
    while (::waitpid(w.pid, &w.status, 0) < 0) {
      if (errno != EINTR) {
        w.status = 0; // not ours to reap (SIGCHLD ignored?): the cache read below decides
        break;
      }
    }
    if (!(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0))
      errors = llvm::joinErrors(std::move(errors), workerError(w, kernels));
  }
  return errors;
}

} // namespace

llvm::Expected<std::vector<CompiledKernel>> compileAll(llvm::ArrayRef<KernelSource> sources, const Target &target,
                                                       const CompileOptions &opts, KernelCache &cache,
                                                       unsigned jobs, CompileStats *stats,
                                                       const CompileProgressFn &progress) {
  auto start = Clock::now();
  CompileStats local;
  CompileStats &st = stats ? *stats : local;
  st = CompileStats{};

  // Distinct kernels by name; equal names promise equal source (KernelSpec::name), and a broken promise
  // is a bug worth stopping for rather than silently dropping one kernel.
  std::vector<const KernelSource *> kernels;
  std::vector<size_t> indexOf; // per input, its distinct kernel
  llvm::StringMap<size_t> byName;
  for (const KernelSource &s : sources) {
    auto [it, inserted] = byName.try_emplace(s.name, kernels.size());
    if (inserted) kernels.push_back(&s);
    else if (kernels[it->second]->text != s.text || kernels[it->second]->entry != s.entry)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "two different kernels are both named '%s'", s.name.c_str());
    indexOf.push_back(it->second);
  }
  st.kernels = unsigned(kernels.size());
  std::vector<std::optional<CompiledKernel>> done(kernels.size());

  if (jobs > 1 && cache.usable()) {
    auto lookupStart = Clock::now();
    std::vector<std::string> keys;
    std::vector<size_t> misses;
    for (size_t i = 0; i < kernels.size(); ++i) {
      llvm::Expected<CacheKey> key = KernelCache::computeKey(*kernels[i], target, opts);
      if (!key) return key.takeError();
      keys.push_back(key->hex);
      if ((done[i] = cache.lookup(key->hex, target))) ++st.hits;
      else misses.push_back(i);
    }
    st.lookupSeconds += msSince(lookupStart) / 1e3;
    // One miss gains nothing from a fork; it is compiled below, in-process.
    if (misses.size() > 1) {
      if (llvm::Error e = runWorkers(misses, kernels, target, opts, cache, jobs, st, progress)) return e;
      for (size_t i : misses)
        if ((done[i] = cache.lookup(keys[i], target))) ++st.misses;
    }
  }

  // Serially, in this process: everything without workers, and whatever the workers could not publish.
  // Every error is collected, as the workers do, so one run shows all broken kernels.
  // A hit here counts as a cache lookup, a miss as a compile.
  llvm::Error errors = llvm::Error::success();
  size_t left = llvm::count_if(done, [](const auto &d) { return !d; }), finished = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (done[i]) continue;
    bool hit = false;
    auto t0 = Clock::now();
    llvm::Expected<CompiledKernel> k = cache.getOrCompile(*kernels[i], target, opts, &hit);
    double ms = msSince(t0);
    if (!k) {
      errors = llvm::joinErrors(std::move(errors), k.takeError());
      continue;
    }
    ++(hit ? st.hits : st.misses);
    if (hit) st.lookupSeconds += ms / 1e3;
    else st.compiled.push_back({kernels[i]->name, ms});
    if (progress) progress({kernels[i]->name, ++finished, left, ms, hit});
    done[i] = std::move(*k);
  }
  if (errors) return errors;

  std::vector<CompiledKernel> out;
  out.reserve(sources.size());
  for (size_t i : indexOf) out.push_back(*done[i]);
  st.seconds = msSince(start) / 1e3;
  return out;
}

unsigned defaultJobs() { return llvm::hardware_concurrency().compute_thread_count(); }

} // namespace minfer
