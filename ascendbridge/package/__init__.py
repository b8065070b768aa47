"""The adaptation package model every stage reads: the spec (adaptation.json), its generator and
templates, the package's uv / system environment and software stack, and the package checker."""
