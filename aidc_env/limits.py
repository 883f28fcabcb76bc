"""Bounds of every number a user can give, each with its reason.

A value outside these bounds is not a case (a renewable ratio of 1e308 makes every cost infinite), so it
is refused with :class:`~aidc_env.errors.InputError` before any work: the documents' schemas
(:func:`aidc_env.schema.limit`) and the command lines' options name them. The bounds are generous: they
exist to keep every cost, energy and count finite and every run meaningful, not to second-guess a study.
"""

from __future__ import annotations

# --------------------------------------------------------------------------------------- the facility

MAX_GPUS = 1_000_000
"""GPU pool N: about 5x the largest announced training cluster (~200,000 GPUs, 2025)."""
MAX_PUE = 3.0
"""Power usage effectiveness: the Uptime Institute surveys report ~1.6 on average and ~2.5 for the oldest sites."""
MAX_KW_PER_GPU = 10.0
"""Rated or idle power per GPU (kW): a GB200 superchip with its host share draws ~1.5 kW; 10 kW is no GPU."""
MAX_SLOTS_PER_DAY = 1440
"""Time slots per day: one-minute slots; finer slots exceed any market's settlement interval (5 min)."""
MAX_HORIZON_DAYS = 366
"""Consecutive days in one instance (``horizon_days``): a (leap) year, the span of a profile source (a year of
hourly data); a longer budget is a sequence of instances."""
MAX_RESTART_MINUTES = 24 * 60.0
"""Checkpoint load time: at most a day (a case also needs it shorter than a checkpoint segment)."""
MAX_TRANCHE_TOKENS = 1e18
"""Daily token tranche W_j: 1e6 GPUs x 1e4 tokens/s/GPU x 86,400 s is ~1e15; 1e18 leaves a wide margin."""

MAX_IDLE_VALUE_USD_PER_GPU_HOUR = 100.0
"""Value of an idle GPU-hour ($): on-demand cloud prices of an H100 are ~$2-12 per GPU-hour (2024-25); 100 is ~10x."""

# --------------------------------------------------------------------------------------- energy

MAX_RENEWABLE_RATIO = 100.0
"""rho, renewable capacity over the facility's rated power: the studies sweep 0..1.5; beyond 100 the facility is
a rounding error of the plant."""
MAX_PRICE_USD_PER_MWH = 100_000.0
"""|price|, PPA price and curtailment penalty ($/MWh): CAISO's bid cap is $2,000/MWh and ERCOT's offer cap
$5,000/MWh; 20x the highest cap."""
MAX_CALL_USD_PER_MWH = 100_000.0
"""A grid call's payment and penalty ($/MWh, or $/MW per call): CAISO's ELRP pays $2,000/MWh; 50x."""
MAX_RENEWABLE_CAPACITY_MW = 1_000_000.0
"""Capacity that normalises solar + wind (MW): CAISO's whole solar + wind fleet is ~30,000 MW."""
MAX_LINK_GBPS = 1e6
"""Inter-site bandwidth for a checkpoint copy (Gbit/s): a petabit per second, 1000x the largest wide-area links."""

# --------------------------------------------------------------------------------------- runs

MAX_TIME_LIMIT_S = 7 * 24 * 3600.0
"""Solver time limit per MILP: a week (the hardest reference days solve in minutes)."""
MAX_SEED = 2**32 - 1
"""Seeds: numpy's legacy ``RandomState`` (used by SB3's ``set_random_seed``) takes 0..2**32 - 1."""
MAX_WORKERS = 256
"""Worker processes: one per core of the largest common servers; more only adds memory and start-up."""
MAX_THREADS = 1024
"""Solver threads."""
MAX_FORECAST_NOISE = 10.0
"""Relative forecast error sigma at 24 h lead: 1000 % already makes the forecast noise only."""
MAX_DAYS = 100_000
"""Days in one evaluation (--max-days): ~270 years of hourly data."""

# --------------------------------------------------------------------------------------- PPO

MAX_TIMESTEPS = 10**10
"""Agent steps of a training run: at the measured ~600 steps/s this is ~200 days of one machine."""
MAX_N_ENVS = 256
"""Parallel envs (see MAX_WORKERS)."""
MAX_N_STEPS = 1_000_000
"""Rollout steps per env per update (the default is 128; a day has 12 decisions in the 2048 case)."""
MAX_N_EPOCHS = 1000
"""Epochs per PPO update (SB3's default is 10)."""
MAX_VALIDATION_EVERY = MAX_DAYS
"""train.py --validation-every: one validation day in every N training days; past the days there are, none."""
MAX_LEARNING_RATE = 1.0
"""Adam steps beyond 1 diverge on any network."""
MAX_COEF = 100.0
"""Entropy and value coefficients, clip range, gradient norm: the usual values are 0.01..1."""
MAX_LAYERS = 16
"""Hidden layers of the policy and value networks."""
MAX_LAYER_WIDTH = 65_536
"""Units per hidden layer (a 65,536-wide layer already holds 4e9 weights to the next)."""
MAX_REWARD_SCALE_USD = 1e9
"""$ per reward unit."""
MAX_LOOKAHEAD_SLOTS = MAX_SLOTS_PER_DAY
"""The env's slot-level look-ahead: at most a day of slots."""
