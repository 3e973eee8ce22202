"""The API's own domain: producers and the portal links keep one address across redeploys and new stacks."""

from __future__ import annotations

from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_route53_targets as route53_targets
from constructs import Construct


class CustomDomain(Construct):
    """A regional API Gateway domain name mapped to the HTTP API's `$default` stage; its certificate is the one
    given, or one made and validated by DNS in `hosted_zone`; with a zone, an alias record points the name at it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        domain_name: str,
        http_api: apigwv2.IHttpApi,
        stage: apigwv2.IHttpStage,
        certificate: acm.ICertificate | None = None,
        hosted_zone: route53.IHostedZone | None = None,
    ):
        super().__init__(scope, construct_id)
        if certificate is None:
            if hosted_zone is None:
                raise ValueError(f"{domain_name}: a custom domain needs a certificate or a hosted zone to make one in")
            certificate = acm.Certificate(
                self,
                "Certificate",
                domain_name=domain_name,
                validation=acm.CertificateValidation.from_dns(hosted_zone),
            )
        self.certificate = certificate
        self.domain_name = apigwv2.DomainName(
            self,
            "DomainName",
            domain_name=domain_name,
            certificate=certificate,
            security_policy=apigwv2.SecurityPolicy.TLS_1_2,
        )
        self.mapping = apigwv2.ApiMapping(self, "ApiMapping", api=http_api, domain_name=self.domain_name, stage=stage)
        self.record: route53.ARecord | None = None
        if hosted_zone is not None:
            self.record = route53.ARecord(
                self,
                "AliasRecord",
                zone=hosted_zone,
                record_name=domain_name,
                target=route53.RecordTarget.from_alias(
                    route53_targets.ApiGatewayv2DomainProperties(
                        self.domain_name.regional_domain_name, self.domain_name.regional_hosted_zone_id
                    )
                ),
            )
        self.url = f"https://{domain_name}"
