"""Measure the real hardware (matmul sweep, memory bandwidth, per-op overhead, collectives, local
model runs), store the results, and calibrate the engine with them (`accelmap measure`,
`accelmap calibrate`).

Every kind runs on one backend (``backends.py``: NumPy on the CPU without PyTorch,
``numpy_backend.py``; PyTorch on any device it sees, ``torch_backend.py``) and stores one
environment record with every row (``environment.py``: device, catalog entry from
``catalog_match.py``, versions, host, settings). Comparing measured with predicted is
validation's job (``validate/local.py``): measure imports nothing above it (validate,
estimate, parallel, search, export, cli; ``tests/measure/test_layering.py``).
"""
