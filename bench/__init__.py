"""Benchmarks of DESIGN §5: measured figures, printed; never part of `make test`."""
