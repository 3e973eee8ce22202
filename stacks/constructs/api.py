"""The HTTP API: the routes and the authorizer of the table of functions (`hookrelay.functions`)."""

from __future__ import annotations

import json
from collections.abc import Mapping

import jsii
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from hookrelay.functions import PUBLIC_ROUTES, ROUTES, Function, Route, authorizer, authorizer_cache_seconds
from stacks.nag import acknowledge

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
    # Stage-wide (requests per second), shared by every caller: it protects the account, not one caller from
    # another. Fairness between keys is the per-key limit the API functions count (domain/rate_limit.py,
    # handlers/http.py, CDK context `api_key_rate_per_second`), set below this so that one flooding key is refused
    # before the stage is.
    THROTTLE = apigwv2.ThrottleSettings(rate_limit=200, burst_limit=400)
    LOG_RETENTION = logs.RetentionDays.ONE_MONTH
    # API Gateway keeps the authorizer's answer per Authorization header this long (why: functions.Authorizer).
    AUTHORIZER_CACHE_TTL = Duration.seconds(authorizer_cache_seconds())

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Mapping[str, lambda_.IFunction],
        api_routes: Mapping[Route, Function] = ROUTES,
        public_routes: Mapping[Route, Function] = PUBLIC_ROUTES,
        api_name: str | None = None,
        log_removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    ):
        """`functions`: every function by name, as made from the table (the authorizer's and the routes').
        `api_name`: the HTTP API's name (default: its construct id)."""
        super().__init__(scope, construct_id)
        api_key_authorizer = authorizers.HttpLambdaAuthorizer(
            "ApiKeyAuthorizer",
            functions[authorizer().name],
            response_types=[authorizers.HttpLambdaResponseType.SIMPLE],
            identity_source=["$request.header.Authorization"],
            results_cache_ttl=self.AUTHORIZER_CACHE_TTL,
        )
        # The authorizer is the API's default: no route can be added without it.
        self.http_api = apigwv2.HttpApi(
            self, "HttpApi", api_name=api_name, create_default_stage=False, default_authorizer=api_key_authorizer
        )
        access_logs = logs.LogGroup(self, "AccessLogs", retention=self.LOG_RETENTION, removal_policy=log_removal_policy)
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=self.THROTTLE,
            access_log_settings=_AccessLogSettings(access_logs),
        )
        self._integrations: dict[str, integrations.HttpLambdaIntegration] = {}
        self._add_routes(api_routes, functions)
        # The consumer portal's static page: the only routes without the authorizer (it serves no data; every
        # call the page makes goes to the routes above with the portal session's token).
        self._add_routes(public_routes, functions, authorizer=apigwv2.HttpNoneAuthorizer())

    @property
    def url(self) -> str:
        """The base URL without a trailing slash (the `$default` stage's own url ends in one), so "$API/v1/..." is
        one slash, not two."""
        return self.http_api.api_endpoint

    def _add_routes(
        self,
        api_routes: Mapping[Route, Function],
        functions: Mapping[str, lambda_.IFunction],
        authorizer: apigwv2.IHttpRouteAuthorizer | None = None,
    ) -> None:
        """`authorizer`: None keeps the API's default (the Lambda authorizer)."""
        for route, function in api_routes.items():
            if function.name not in self._integrations:
                self._integrations[function.name] = integrations.HttpLambdaIntegration(
                    f"{function.name.title()}Integration", functions[function.name]
                )
            added = self.http_api.add_routes(
                path=route.path,
                methods=[apigwv2.HttpMethod(route.method)],
                integration=self._integrations[function.name],
                **({"authorizer": authorizer} if authorizer is not None else {}),
            )
            if authorizer is not None:
                for public in added:
                    acknowledge(
                        public,
                        "AwsSolutions-APIG4",
                        "The consumer portal's static page (HTML, CSS, JavaScript, no data) is served without the "
                        "authorizer so a browser can load it; every call it makes goes to routes behind the authorizer "
                        "with the portal session's token.",
                    )
