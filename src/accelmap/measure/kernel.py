"""What a backend implementation (``numpy_backend``, ``torch_backend``) shares with the module
that picks one (``measure.backends``), below both: a kernel is a closure that launches one kernel,
and the line that installs PyTorch. ``backends`` imports the implementations, never the reverse.
"""

from __future__ import annotations

from collections.abc import Callable

Kernel = Callable[[], object]
MEASURE_EXTRA = "pip install 'accelmap[measure]'"
