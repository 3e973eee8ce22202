"""The HTTP API: one route per `routes.ROUTES` entry, every one behind the API-key Lambda authorizer."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import jsii
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from hookrelay.handlers import routes

# One JSON line per request; the authorizer's key_id attributes every call to a key without logging the key.
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "requestTime": "$context.requestTime",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "responseLatency": "$context.responseLatency",
    "sourceIp": "$context.identity.sourceIp",
    "keyId": "$context.authorizer.key_id",
    "authorizerError": "$context.authorizer.error",
    "integrationError": "$context.integrationErrorMessage",
}


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS))


class Api(Construct):
    # Stage-wide defaults (requests per second); a key that floods the API gets 429s, not the whole account's quota.
    THROTTLE = apigwv2.ThrottleSettings(rate_limit=200, burst_limit=400)
    LOG_RETENTION = logs.RetentionDays.ONE_MONTH
    # 0: a revoked key stops working on its very next request.
    AUTHORIZER_CACHE_TTL = Duration.seconds(0)

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        authorizer_function: lambda_.IFunction,
        functions: Mapping[str, lambda_.IFunction],
        api_routes: Iterable[routes.Route] = routes.ROUTES,
    ):
        super().__init__(scope, construct_id)
        authorizer = authorizers.HttpLambdaAuthorizer(
            "ApiKeyAuthorizer",
            authorizer_function,
            response_types=[authorizers.HttpLambdaResponseType.SIMPLE],
            identity_source=["$request.header.Authorization"],
            results_cache_ttl=self.AUTHORIZER_CACHE_TTL,
        )
        # The authorizer is the API's default: no route can be added without it.
        self.http_api = apigwv2.HttpApi(self, "HttpApi", create_default_stage=False, default_authorizer=authorizer)
        access_logs = logs.LogGroup(
            self, "AccessLogs", retention=self.LOG_RETENTION, removal_policy=RemovalPolicy.DESTROY
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=self.THROTTLE,
            access_log_settings=_AccessLogSettings(access_logs),
        )
        self._add_routes(api_routes, functions)

    @property
    def url(self) -> str:
        return self.stage.url

    def _add_routes(self, api_routes: Iterable[routes.Route], functions: Mapping[str, lambda_.IFunction]) -> None:
        route_integrations: dict[str, integrations.HttpLambdaIntegration] = {}
        for route in api_routes:
            if route.function not in route_integrations:
                route_integrations[route.function] = integrations.HttpLambdaIntegration(
                    f"{route.function.title()}Integration", functions[route.function]
                )
            self.http_api.add_routes(
                path=route.path,
                methods=[apigwv2.HttpMethod(route.method)],
                integration=route_integrations[route.function],
            )
