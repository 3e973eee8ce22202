"""Imported once by the functions' fork server (`local.function_workers`), never elsewhere: what every worker
would otherwise load for itself, loaded before the workers are forked.

- The AWS service models: making a boto3 client first reads its service's model (JSON) from disk, about 0.2 s
  of CPU for the four services the functions use. Read once here, into the default session that `boto3.client`
  and `boto3.resource` use, every worker inherits them already parsed.
- The modules the handlers import on first use rather than at a cold start (the wiring's services and adapters,
  `requests` for delivery, Powertools' idempotency for keyed requests): on Lambda that keeps a cold start short;
  here every new worker would pay them again on its first invocation (a fifth of the workers' time in a
  600-event run, where the interpreter compiles them from source when no bytecode is cached).
"""

import importlib
import pkgutil

import boto3

import hookrelay
from local.processes import name_this_process

name_this_process("fn-forkserver")

for _service in ("dynamodb", "sqs", "stepfunctions", "sns"):
    boto3.client(_service)
boto3.resource("dynamodb")

for _module in pkgutil.walk_packages(hookrelay.__path__, "hookrelay."):
    importlib.import_module(_module.name)
for _name in (
    "requests",
    "fastjsonschema",
    "aws_lambda_powertools.utilities.idempotency",
    "aws_lambda_powertools.utilities.idempotency.serialization.pydantic",
):
    importlib.import_module(_name)
