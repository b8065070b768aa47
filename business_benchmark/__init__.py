"""The business_benchmark stage: task quality on real data, target device against the reference."""
