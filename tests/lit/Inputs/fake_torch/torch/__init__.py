"""A stand-in for torch, for the lit test of bench/torch_baseline.py's timing (tests/lit/torch-baseline-timing.test).

Only what time_median touches: torch.cuda.Event (record, query, elapsed_time), synchronize and _sleep. The GPU
is simulated on one clock (microseconds): _sleep(cycles) keeps it busy for cycles / CYCLES_PER_US, each timed
run takes RUN_US of GPU time, and the host needs HOST_US to enqueue a run (the timed function advances the
host clock: torch.cuda.host_step). The environment sets HOST_US (default 1) and RUN_US (default 10).
"""
import os

CYCLES_PER_US = 2000.0


class _Cuda:
    def __init__(self):
        self.host = 0.0        # host clock
        self.gpu_free = 0.0    # when the GPU has finished what was enqueued
        self.host_us = float(os.environ.get("HOST_US", "1"))
        self.run_us = float(os.environ.get("RUN_US", "10"))
        self.sleeps = []       # the busy blocks asked for, in cycles
        outer = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                self.at = max(outer.host, outer.gpu_free)  # completes once everything before it has

            def query(self):
                return self.at is not None and self.at <= outer.host

            def elapsed_time(self, end):
                return (end.at - self.at) / 1000.0  # ms

        self.Event = Event

    def synchronize(self):
        self.host = max(self.host, self.gpu_free)

    def _sleep(self, cycles):
        self.sleeps.append(cycles)
        self.gpu_free = max(self.host, self.gpu_free) + cycles / CYCLES_PER_US

    def host_step(self):
        """One timed run: the host spends HOST_US enqueueing it, the GPU RUN_US running it."""
        self.host += self.host_us
        self.gpu_free = max(self.host, self.gpu_free) + self.run_us


cuda = _Cuda()
