"""Imported once by the functions' fork server (`local.function_workers`), never elsewhere: what every worker
would otherwise load for itself, loaded before the workers are forked.

- The AWS service models: making a boto3 client first reads its service's model (JSON) from disk, about 0.2 s
  of CPU for the four services the functions use. Read once here, into the default session that `boto3.client`
  and `boto3.resource` use, every worker inherits them already parsed.
- The functions' clients and tables themselves (`hookrelay.adapters.aws`, kept per process): a worker made them on
  its first invocation, each table about 13 ms of CPU, so a new delivery worker's first attempt cost about 67 ms
  against 8 ms warm. Workers are forked when every one is busy, which is when a hanging endpoint holds them or a
  burst begins: on the latency that matters. No call is made here: a connection opened before the fork would be
  one socket shared by every worker; each worker's pool connects on its own first call.
- The modules the handlers import on first use rather than at a cold start (the wiring's services and adapters,
  `requests` for delivery, Powertools' idempotency for keyed requests): on Lambda that keeps a cold start short;
  here every new worker would pay them again on its first invocation (a fifth of the workers' time in a
  600-event run, where the interpreter compiles them from source when no bytecode is cached).
"""

import importlib
import os
import pkgutil

import boto3

import hookrelay
from hookrelay.adapters import aws, schema
from local.processes import keep_what_is_loaded, name_this_process

name_this_process("fn-forkserver")

_SERVICES = ("dynamodb", "sqs", "stepfunctions", "sns")
if "AWS_ENDPOINT_URL" in os.environ:  # the stack's moto: never a client of AWS itself kept for every worker
    for _service in _SERVICES:
        aws.client(_service)  # reads the service's model into the default session, as boto3.client does
    for _table in schema.ALL_TABLES:
        if _table.env_var in os.environ:
            aws.table(os.environ[_table.env_var])
else:  # the models alone
    for _service in _SERVICES:
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
keep_what_is_loaded()  # last: what every worker inherits
