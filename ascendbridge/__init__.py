"""AscendBridge: the shared kernel (board, team lead, agents, runtime, discovery, config)."""

__version__ = "0.1.0"
