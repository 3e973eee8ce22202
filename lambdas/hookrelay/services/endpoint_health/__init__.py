"""The old name of `hookrelay.services.auto_disable`, kept only while stacks/config.py and local/stack.py still
import it from here: delete this package once they import `hookrelay.services.auto_disable`.

(A package rather than a module of the old name, so that git follows the rename of the module itself.)
"""

from hookrelay.services.auto_disable import WARNINGS, AutoDisablePolicy, InvalidPolicy, policy_from_config

__all__ = ["WARNINGS", "AutoDisablePolicy", "InvalidPolicy", "policy_from_config"]
