"""Imported once by the functions' fork server (`local.function_workers`), never elsewhere: the AWS service
models every worker's clients need, loaded before the workers are forked.

Making a boto3 client first reads its service's model (JSON) from disk: about 0.2 s of CPU for the four
services the functions use, in every new worker, and most of a worker's start. Read once here, into the
default session that `boto3.client` and `boto3.resource` use, every worker inherits them already parsed.
"""

import boto3

for _service in ("dynamodb", "sqs", "stepfunctions", "sns"):
    boto3.client(_service)
boto3.resource("dynamodb")
