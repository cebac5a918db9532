"""Reproducible measurements; each ``bench_<name>.py`` writes ``results/<name>.md``."""
