"""Measure the real hardware (matmul sweep, memory bandwidth, collectives), store the results,
and calibrate the engine with them (`accelmap measure`, `accelmap calibrate`)."""
