"""Local-only code: provisioning on moto, the HTTP-to-API-Gateway bridge, the queue pollers.

Nothing here is deployed; the Lambda handlers never import it. They import `hookrelay`, installed into the
environment (editable, from lambdas/, the deployed asset's root) by `make install`.
"""
