"""The dispatch env (:class:`~aidc_env.env.core.DispatchEnv`): one Gymnasium class, its action types chosen by config.

``gymnasium.make("aidc_env/CheckpointDispatch-v0")``, ``FleetDispatch-v0``, ``SitesDispatch-v0`` and
``SitesFleetDispatch-v0`` are the same class with the default configurations of :data:`~aidc_env.env.core.VARIANTS`.
"""

from aidc_env.env.core import (DEFAULT_REWARD_SCALE_USD, DEFAULT_TERMINAL_PENALTY_FACTOR, VARIANTS, DispatchEnv,
                               default_config, penalty_usd_per_token)
from aidc_env.env.observation import DEFAULT_LOOKAHEAD

ENV_ID = "aidc_env/CheckpointDispatch-v0"
FLEET_ENV_ID = "aidc_env/FleetDispatch-v0"
SITES_ENV_ID = "aidc_env/SitesDispatch-v0"

__all__ = ["DEFAULT_LOOKAHEAD", "DEFAULT_REWARD_SCALE_USD", "DEFAULT_TERMINAL_PENALTY_FACTOR", "ENV_ID", "FLEET_ENV_ID",
           "SITES_ENV_ID", "VARIANTS", "DispatchEnv", "default_config", "penalty_usd_per_token"]
