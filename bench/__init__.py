"""VDQ's benchmarks: AWS requests per message, cost, cold start, throughput and scale.

``python -m bench`` (``make bench``) runs them all and prints one table of figure, target,
measured value and whether it holds; the same rows go to ``bench/results/<date>.json``.
"""
