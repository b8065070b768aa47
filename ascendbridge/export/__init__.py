"""Export completed adaptations as a standalone repository or zips (package_adaptations.py)."""
