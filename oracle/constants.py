"""Defaults of the oracle, in a module light enough for the command line to read before any solver loads."""

DEFAULT_TIME_LIMIT_S = 600.0
"""Solver time limit of :func:`oracle.solve` and the command line (seconds)."""
DEFAULT_MIP_GAP = 1e-4
"""Relative gap (objective − bound) / |objective| at which a solve counts as optimal."""
DEFAULT_SOLVER = "highs"
"""HiGHS through highspy, with Pyomo's persistent ``pyomo.contrib.solver`` interface."""
FORMULATIONS = ("fast", "textbook")
"""``fast``: joint states with exact block costs (the default); ``textbook``: per-slot load and grid variables."""
STATUSES = ("optimal", "infeasible", "time_limit", "error")
