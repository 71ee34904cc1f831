"""negharness.api.options: the public face of `negharness.contracts.options` (one parser for every
``KEY=VALUE`` option a plugin takes (``-M`` models, ``-T`` tasks, ``-O`` trainers)).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.options import (
    BindsOptions as BindsOptions,
    ENV_FLAGS as ENV_FLAGS,
    FALSE as FALSE,
    OptionSpec as OptionSpec,
    TRUE as TRUE,
    bind_declared as bind_declared,
    canonical_text as canonical_text,
    check_batch_size as check_batch_size,
    check_env_flags as check_env_flags,
    declared_options as declared_options,
    describe_options as describe_options,
    env_flag as env_flag,
    frozen_empty as frozen_empty,
    parse_bool as parse_bool,
    parse_options as parse_options,
    refuse_unknown as refuse_unknown,
    split_options as split_options,
    takes_options as takes_options,
)

__all__ = [
    "BindsOptions", "ENV_FLAGS", "FALSE", "OptionSpec", "TRUE", "bind_declared", "canonical_text",
    "check_batch_size", "check_env_flags", "declared_options", "describe_options", "env_flag",
    "frozen_empty", "parse_bool", "parse_options", "refuse_unknown", "split_options", "takes_options",
]
