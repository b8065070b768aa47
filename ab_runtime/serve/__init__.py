"""The serving stage's model side: exporting the package's weights and reference for the engine."""
