"""The HTTP API serves exactly the table of functions' routes, every one behind its authorizer but the portal's
static page, logged and throttled."""

from __future__ import annotations

from hookrelay.functions import PORTAL, PUBLIC_ROUTES, SERVED_ROUTES, authorizer
from tests.support.synth import Synthesized, function_logical_ids


def _authorizer(synthesized: Synthesized) -> tuple[str, dict]:
    authorizers = synthesized.resources("AWS::ApiGatewayV2::Authorizer")
    assert len(authorizers) == 1
    ((logical_id, resource),) = authorizers.items()
    return logical_id, resource["Properties"]


def test_the_routes_are_exactly_the_route_table(synthesized: Synthesized) -> None:
    route_keys = sorted(props["RouteKey"] for props in synthesized.properties("AWS::ApiGatewayV2::Route"))
    assert route_keys == sorted(route.route_key for route in SERVED_ROUTES)


def test_every_route_but_the_portal_page_requires_the_authorizer(synthesized: Synthesized) -> None:
    authorizer_id, _ = _authorizer(synthesized)
    public = {route.route_key for route in PUBLIC_ROUTES}
    assert public == {"GET /portal", "GET /portal/{asset}"}
    assert {f.name for f in PUBLIC_ROUTES.values()} == {PORTAL.name}  # it touches no table, queue or topic
    for props in synthesized.properties("AWS::ApiGatewayV2::Route"):
        if props["RouteKey"] in public:
            assert props["AuthorizationType"] == "NONE", props["RouteKey"]
            continue
        assert props["AuthorizationType"] == "CUSTOM", props["RouteKey"]
        assert props["AuthorizerId"] == {"Ref": authorizer_id}, props["RouteKey"]


def test_the_authorizer_is_the_simple_response_lambda_cached_a_minute(synthesized: Synthesized) -> None:
    _, props = _authorizer(synthesized)
    assert props["AuthorizerType"] == "REQUEST"
    assert props["AuthorizerPayloadFormatVersion"] == "2.0"
    assert props["EnableSimpleResponses"] is True
    assert props["IdentitySource"] == ["$request.header.Authorization"]
    assert props["AuthorizerResultTtlInSeconds"] == 60  # a revoked key works for up to a minute (docs/deploying.md)
    authorizer_function = function_logical_ids(synthesized)[authorizer().name]
    assert {"Fn::GetAtt": [authorizer_function, "Arn"]} in props["AuthorizerUri"]["Fn::Join"][1]


def test_each_route_reaches_the_function_the_route_table_names(synthesized: Synthesized) -> None:
    functions = function_logical_ids(synthesized)
    integrations = synthesized.template["Resources"]
    for props in synthesized.properties("AWS::ApiGatewayV2::Route"):
        route = next(r for r in SERVED_ROUTES if r.route_key == props["RouteKey"])
        integration_id = props["Target"]["Fn::Join"][1][1]["Ref"]
        integration = integrations[integration_id]["Properties"]
        function = SERVED_ROUTES[route]
        assert integration["IntegrationUri"] == {"Fn::GetAtt": [functions[function.name], "Arn"]}, route.route_key
        assert integration["PayloadFormatVersion"] == "2.0"


def test_the_stage_logs_access_and_throttles(synthesized: Synthesized) -> None:
    (stage,) = synthesized.properties("AWS::ApiGatewayV2::Stage")
    assert stage["StageName"] == "$default" and stage["AutoDeploy"] is True
    assert "$context.requestId" in stage["AccessLogSettings"]["Format"]
    assert "DestinationArn" in stage["AccessLogSettings"]
    throttling = stage["DefaultRouteSettings"]
    assert throttling["ThrottlingRateLimit"] > 0 and throttling["ThrottlingBurstLimit"] > 0
