"""Predicted vs published and measured cases, with the error summary (`accelmap validate`)."""
