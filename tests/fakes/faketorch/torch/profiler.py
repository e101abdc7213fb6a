import os
import shutil


class ProfilerActivity:
    CPU = "cpu"
    CUDA = "cuda"


def schedule(wait, warmup, active, repeat=1):
    return (wait, warmup, active)


class profile:
    def __init__(self, activities=None, schedule=None, on_trace_ready=None, **kwargs):
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.steps = 0
        self.kwargs = kwargs

    def start(self):
        pass

    def step(self):
        self.steps += 1
        if self.schedule and self.steps == sum(self.schedule):
            self.on_trace_ready(self)

    def stop(self):
        pass

    def export_chrome_trace(self, path):
        shutil.copy(os.environ["FAKE_TRACE"], path)
