"""Synthesize the real app once per test session (jsii is slow) and hand the tests its cloud assembly.

The app gets cdk.json's context and reads the default stage's file (deploy/dev.json), as `cdk synth` would, plus
a custom retry schedule given the way the CLI passes one (`-c retry_schedule='[...]'`: a JSON string, overriding the
stage file's), so the schedule's path to the functions is tested on the same synth; an `alarm_email`, which the
stage file leaves empty; the event catalogue enforced (off in the stage file), as
`-c enforce_event_catalogue=true` passes it; the narrow port policy for endpoint URLs (wide in the stage file); and
3 delivery shards (2 in the stage file).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.synth import (
    ALARM_EMAIL,
    CUSTOM_RETRY_SCHEDULE,
    DELIVERY_SHARDS,
    ENFORCED_EVENT_CATALOGUE,
    NARROW_ENDPOINT_PORTS,
    Synthesized,
    cdk_json_context,
)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    from stacks.app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    app, stack = build_app(
        {
            **cdk_json_context(),
            "retry_schedule": CUSTOM_RETRY_SCHEDULE,
            "alarm_email": ALARM_EMAIL,
            "enforce_event_catalogue": ENFORCED_EVENT_CATALOGUE,
            "endpoint_ports": NARROW_ENDPOINT_PORTS,
            "delivery_shards": DELIVERY_SHARDS,
        },
        outdir=str(outdir),
    )
    try:
        app.synth()  # runs the cdk-nag AWS Solutions checks: unacknowledged findings fail here
    except RuntimeError as error:
        report = outdir / "validation-report.json"
        details = report.read_text() if report.exists() else ""
        pytest.fail(f"cdk synth failed: {error}\n{details}")
    template = json.loads((outdir / stack.template_file).read_text())
    yield Synthesized(
        outdir=outdir, stack_name=stack.stack_name, template=template, function_settings=stack.function_settings
    )
