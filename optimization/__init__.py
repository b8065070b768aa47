"""The Optimization stage: execution-grounded pass search, its evidence and its gates."""
