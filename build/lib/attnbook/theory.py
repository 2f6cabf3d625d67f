"""The theory's closed forms, gathered in one namespace.

- :mod:`attnbook.frequency`  -- the average signed frequency ``alpha``;
- :mod:`attnbook.one_step`   -- the one-gradient-step update and its closed-form prediction;
- :mod:`attnbook.max_margin` -- the max-margin token-selection direction.
"""

from .frequency import *  # noqa: F401,F403
from .frequency import __all__ as _frequency_all
from .max_margin import *  # noqa: F401,F403
from .max_margin import __all__ as _max_margin_all
from .one_step import *  # noqa: F401,F403
from .one_step import __all__ as _one_step_all

__all__ = [*_frequency_all, *_one_step_all, *_max_margin_all]
