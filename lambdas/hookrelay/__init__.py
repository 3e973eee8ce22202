"""hookrelay: webhook delivery you can be held to.

`domain` holds the contract (pure Python, no AWS), `services` the use cases written against the ports
in `services.ports`, `adapters` the DynamoDB/SQS/Step Functions/HTTP implementations of those ports,
and `handlers` the thin Lambda entry points.
"""
