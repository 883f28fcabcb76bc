"""Defaults of the oracle, in a module light enough for the command line to read before any solver loads."""

DEFAULT_TIME_LIMIT_S = 600.0
"""Solver time limit of :func:`oracle.solve` and the command line (seconds)."""
DEFAULT_MIP_GAP = 1e-4
"""Relative gap (objective − bound) / |objective| at which a solve counts as optimal."""
DEFAULT_SOLVER = "highs"
"""HiGHS through highspy, with Pyomo's persistent ``pyomo.contrib.solver`` interface."""
FORMULATIONS = ("fast", "textbook")
"""The day model's formulations (:class:`oracle.model.OracleModel`): ``fast``, joint states with exact block costs (the
default); ``textbook``, per-slot load and grid variables."""
METHODS = ("auto", "exact", "decomposition", "textbook")
"""The methods of :func:`oracle.solve` (:mod:`oracle.entry` describes each)."""
PLACEMENTS = ("move", "home", "stay", "free")
"""Where the decomposition lets jobs run (:mod:`oracle.graph` describes each)."""
STATUSES = ("optimal", "infeasible", "time_limit", "error")
DECOMPOSITION_REVISION = 4
"""Revision of the decomposition (:mod:`oracle.decomposition` and the modules it drives), recorded in every cached
teacher answer (:mod:`agents.teacher`) so that a cache solved by an earlier oracle is solved again. Bump it with any
change that can change the schedule or bound a time-limited solve returns."""
