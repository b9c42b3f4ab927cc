"""Reproducing the papers: the harness (protocols, cells, the resumable runner), the benchmark, and one protocol
per paper."""
