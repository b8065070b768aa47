"""Discovery stage: DISCOVERY_STAGE (run + gate) and its evidence, on the kernel's model-metadata
library (ascendbridge.discovery: hub, model files, decisions), which the CLI uses too."""
