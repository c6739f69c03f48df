"""Benchmarks for scrubjay: the Temporal Generalization Test (TGT) and its scoring."""
