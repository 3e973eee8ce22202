"""The capacity model's operation profile is the code's: re-measured on moto, it matches the committed file."""

from __future__ import annotations

from bench.capacity import PROFILE_EVENTS, drifted, load_profile, measure_profile


def test_the_operation_profile_is_what_the_handlers_do_now() -> None:
    differences = drifted(measure_profile(PROFILE_EVENTS), load_profile())
    assert not differences, (
        "the handlers' AWS calls changed: re-measure with make capacity ARGS='--measure --write-docs'\n"
        + "\n".join(differences)
    )
