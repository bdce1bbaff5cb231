"""A command's settings: the environment's, with its flags over them."""
from __future__ import annotations

import dataclasses
import os

from lakestats.core.settings import Settings, names

# flag -> (settings group, setting); a flag left out keeps the environment's value or default
FLAG_SETTINGS = {
    "bins": ("partition", "max_bins"), "bloom_min_distinct": ("partition", "bloom_min_distinct"),
    "range_set_size": ("partition", "range_set_size"),
    "frequency_algorithm": ("frequencies", "algorithm"),
    "low_distinct_max": ("frequencies", "low_distinct_max"),
    "low_duplicate_max": ("frequencies", "low_duplicate_max"),
    "all_values": ("frequencies", "all_values"),
    "redis_url": (None, "redis_url"), "allow_partial": (None, "allow_partial"),
    "exact": (None, "exact"),
    "max_attempts": (None, "max_attempts"), "timeout": (None, "timeout"),
    "workers": (None, "workers"), "function_name": (None, "steps_function"),
    "window": (None, "reduce_window"), "wait": (None, "lock_wait"),
    "exact_after": (None, "exact_after"), "pack_bytes": (None, "pack_bytes"),
}


def settings_of(args) -> Settings:
    """The environment's settings, with the command's flags over them."""
    given: dict = {"partition": {}, "frequencies": {}, None: {}}
    for flag, (group, name) in FLAG_SETTINGS.items():
        value = getattr(args, flag, None)
        if value is not None and value is not False:
            given[group][name] = value
    if getattr(args, "statistics", None):    # files by absolute path: workers run elsewhere
        given["partition"]["statistics"] = tuple(
            os.path.abspath(spec) if spec.endswith(".py") else spec
            for spec in names(args.statistics))
    if getattr(args, "value_index", None):
        given[None]["value_index"] = names(args.value_index)
    if getattr(args, "tables", None):
        given[None]["tables"] = tuple(t.rstrip("/") for t in names(args.tables))
    settings = Settings.from_env(os.environ)
    settings = dataclasses.replace(
        settings, partition=dataclasses.replace(settings.partition, **given["partition"]),
        frequencies=dataclasses.replace(settings.frequencies, **given["frequencies"]),
        **given[None])
    if settings.redis_password:
        # workers started from here (local processes, a local Spark) read it from the
        # environment they inherit, as they read $REDIS_PASSWORD: the URL they get has none
        os.environ["REDIS_PASSWORD"] = settings.redis_password
    return settings
