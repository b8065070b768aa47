"""Re-validation: re-run completed adaptations on the current stack and compare with their baseline."""
