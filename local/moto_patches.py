"""The local stack's replacements of moto's attributes, put in and taken out together.

Each fix to moto (`moto_dynamodb`, `moto_sqs`) lists what it replaces once: `install` puts the replacements in
(the moto servers of the local stack), `uninstall` puts moto's own back (the tests that compare the two). What is
put back is what the owner itself held when the list was made, so a classmethod or a property comes back as
the descriptor it was, and an attribute the owner inherited is inherited again.
"""

from __future__ import annotations

from typing import Any

_INHERITED = object()  # the owner had no attribute of its own by that name


class Patches:
    def __init__(self, *replacements: tuple[Any, str, Any]) -> None:
        self._replacements = replacements
        self._originals = [(owner, name, vars(owner).get(name, _INHERITED)) for owner, name, _ in replacements]

    def install(self) -> None:
        """Idempotent: installing twice installs the same replacements."""
        for owner, name, replacement in self._replacements:
            setattr(owner, name, replacement)

    def uninstall(self) -> None:
        for owner, name, original in self._originals:
            if original is _INHERITED:
                if name in vars(owner):
                    delattr(owner, name)
            else:
                setattr(owner, name, original)
