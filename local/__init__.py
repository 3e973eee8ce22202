"""Local-only code: provisioning on moto, the HTTP-to-API-Gateway bridge, the queue pollers.

Nothing here is deployed; the Lambda handlers never import it.
"""
