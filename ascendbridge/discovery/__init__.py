"""Discovery: model metadata from the Hub, a local directory or the local HF cache (no torch)."""
