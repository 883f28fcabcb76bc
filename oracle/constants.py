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
SITES_ORACLE_REVISION = 3
"""Revision of the sites decomposition (:mod:`oracle.sites_cg` and the modules it drives), recorded in every cached
answer (:mod:`agents.sites_oracle`) so that a cache solved by an earlier oracle is solved again instead of being
taken as the reference or the teacher. Bump it with any change that can change the schedule or bound a time-limited
solve returns. 1: column generation and branch and price; 2: the pattern master and its dives (2026-12-02);
3: the branch and price on the pattern master (2026-12-02). Before it was recorded, a reference cached at 02:23 UTC
by revision 1 was 1.3 % dearer on the mean held-out day than revision 3's (docs/sites.md "Env and PPO")."""
