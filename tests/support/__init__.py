"""Shared test helpers (real environments and boards, no mocks)."""
