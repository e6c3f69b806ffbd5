"""Export plans as launchable framework configs (`accelmap export`)."""
