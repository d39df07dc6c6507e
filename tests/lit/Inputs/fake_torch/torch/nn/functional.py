"""Empty: bench/torch_baseline.py imports it."""
