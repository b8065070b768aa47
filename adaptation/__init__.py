"""Adaptation stage: spec, generator and templates, the healer, and the independent gate."""
