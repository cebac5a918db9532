"""Reading and reporting runs: the run directory's layout (writer and readers), the
entropy diagnostics of the paper's section 4.1, one run's report, a comparison's report,
and their plots (matplotlib, Agg)."""
