"""cdk-nag acknowledgments: every suppressed finding names its rule and says why, in one call."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    if not reason.strip():
        raise ValueError(f"acknowledging {rule} needs a written reason")
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))
