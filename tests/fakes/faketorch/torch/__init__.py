# A stand-in for PyTorch in tests: just enough of torch.profiler, torch.optim
# and torch.cuda for aisp's wrapper to run its schedule and export a trace.
__version__ = "0.0.0-fake"
from . import cuda, optim, profiler  # noqa: F401
