"""The REST API and its users: Cognito user pool, groups, machine clients, the operator
console's client, the routes."""

from __future__ import annotations

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import DeployConfig, camel
from infra.functions import retention
from infra.nag import suppress
from vdq import console
from vdq.api import GATEWAY_ERRORS, THROTTLE_RETRY_AFTER_SECONDS, gateway_template
from vdq.core import resources
from vdq.core.settings import DEFAULT_GROUP_PERMISSIONS
from vdq.operations import spec

STAGE = resources.API_STAGE
TWILIO_CALLBACK_PATH = "twilio/status-callback"
GROUPS = tuple(DEFAULT_GROUP_PERMISSIONS)  # vdq-senders, vdq-viewers, vdq-operators, vdq-admins
# Scopes "vdq/<group>": vdq.api.caller reads them as groups.
RESOURCE_SERVER = resources.API_RESOURCE_SERVER
USER_SCOPE = "aws.cognito.signin.user.admin"  # the scope of a signed-in user's access token

# The routes of the operation table (vdq.operations.spec), by the function that serves each;
# an operation that needs no permission is public (Twilio signs its callback; health and the
# OpenAPI document are open).
def _routes(function: str) -> tuple[tuple[str, str], ...]:
    return tuple((op.method, op.path.lstrip("/")) for op in spec.OPERATIONS
                 if op.function == function)  # fmt: skip


# The operator console's files (vdq.console): public, served by the operator function.
CONSOLE_ROUTES = tuple(("GET", resource.lstrip("/")) for resource in console.RESOURCES)
PUBLIC_ROUTES = {(op.method, op.path.lstrip("/")) for op in spec.OPERATIONS
                 if not op.permissions} | set(CONSOLE_ROUTES)  # fmt: skip
ENQUEUE_ROUTES = _routes("enqueue")
OPERATOR_ROUTES = _routes("operator") + CONSOLE_ROUTES
WEBHOOK_ROUTES = _routes("webhook")


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        enqueue: lambda_.IFunction,
        operator: lambda_.IFunction,
        webhook: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, id)
        self._users(config)
        self.access_logs: logs.LogGroup | None = None
        logging: dict = {}
        if config.api_logs:  # needs the account's CloudWatch role (vdq:cloudWatchRole or set)
            self.access_logs = logs.LogGroup(
                self,
                "AccessLogs",
                retention=retention(config.log_retention_days),
                removal_policy=RemovalPolicy.DESTROY,
            )
            logging = {
                "access_log_destination": apigw.LogGroupLogDestination(self.access_logs),
                "access_log_format": apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                "logging_level": apigw.MethodLoggingLevel.ERROR,
            }
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            # API Gateway's metrics (the Api5xx alarm, the dashboard) are per API name: the
            # stack's, not CDK's default of the construct id, which other apps' APIs share.
            rest_api_name=Stack.of(self).stack_name,
            description="VDQ: outbound email and SMS dispatch queue",
            # An account-wide setting: only when the deployer chooses it (vdq:cloudWatchRole).
            cloud_watch_role=config.cloud_watch_role,
            cloud_watch_role_removal_policy=(
                RemovalPolicy.DESTROY if config.cloud_watch_role else None
            ),
            endpoint_types=[apigw.EndpointType.REGIONAL],
            deploy_options=apigw.StageOptions(
                stage_name=STAGE,
                throttling_rate_limit=config.api_throttle_rate,
                throttling_burst_limit=config.api_throttle_burst,
                data_trace_enabled=False,
                tracing_enabled=config.tracing == "active",
                metrics_enabled=True,
                **logging,
            ),
        )
        # CDK adds an output of the stage's URL of its own (ApiRestApiEndpoint<hash>): the
        # stack's ApiUrl output is that URL, so the console's outputs list it once.
        self.rest_api.node.try_remove_child("Endpoint")
        if not config.api_logs:
            for rule in ("APIG1", "APIG6"):
                suppress(
                    self.rest_api,
                    rule,
                    "stage logs need API Gateway's account-wide CloudWatch role, which a stack "
                    "should not own by default: vdq:apiLogs turns them on "
                    "(docs/reference/settings.md)",
                )
        self._gateway_responses()
        self.authorizer = apigw.CognitoUserPoolsAuthorizer(
            self, "Authorizer", cognito_user_pools=[self.user_pool]
        )
        self.validator = self.rest_api.add_request_validator(
            "Validator", validate_request_parameters=True, validate_request_body=True
        )
        self.methods: dict[tuple[str, str], apigw.Method] = {}
        for routes, function in (
            (ENQUEUE_ROUTES, enqueue),
            (OPERATOR_ROUTES, operator),
            (WEBHOOK_ROUTES, webhook),
        ):
            # One invoke permission per function for this API (not two per method).
            integration = apigw.LambdaIntegration(function, scope_permission_to_method=False)
            for method, path in routes:
                self.methods[(method, path)] = self._route(method, path, integration)
        self._console_client()
        suppress(
            self.rest_api,
            "APIG3",
            "WAF is left to the deployer (cost, rules depend on the producers); the API is "
            "throttled per stage and every private path needs a Cognito token",
        )
        suppress(
            self.rest_api,
            "IAM4",
            "API Gateway's account-level logging role uses the AWS managed push-to-logs policy",
            findings=[
                "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AmazonAPIGatewayPushToCloudWatchLogs"
            ],
        )

    @property
    def url(self) -> str:
        """The stage URL, built without referring to the stage (functions behind it read it)."""
        return (
            f"https://{self.rest_api.rest_api_id}.execute-api.{Aws.REGION}.{Aws.URL_SUFFIX}"
            f"/{STAGE}/"
        )

    @property
    def console_url(self) -> str:
        """Where the operator console is: its page, and its OAuth callback."""
        return f"{self.url}console/"

    def _console_client(self) -> None:
        """The console's app client: authorization code with PKCE (a public client, no secret)
        at the user pool's hosted UI, calling back to the console's page. Its access token
        carries the user's groups (cognito:groups) and the signed-in user's scope the private
        routes accept; never a vdq/<group> scope, which would grant a group to every user."""
        self.console_client = self.user_pool.add_client(
            "ConsoleClient",
            generate_secret=False,
            auth_flows=cognito.AuthFlow(),
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=[cognito.OAuthScope.OPENID, cognito.OAuthScope.COGNITO_ADMIN],
                callback_urls=[self.console_url],
                logout_urls=[self.console_url],
            ),
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
            prevent_user_existence_errors=True,
            access_token_validity=Duration.hours(1),
            id_token_validity=Duration.hours(1),
        )

    def _gateway_responses(self) -> None:
        """API Gateway's own answers (401, 429, 413, ...) in the error shape the functions use,
        so a typed client parses every error alike; 429 says when to try again."""
        for g in GATEWAY_ERRORS:
            throttled = g.status == 429
            retry = {"Retry-After": f"'{THROTTLE_RETRY_AFTER_SECONDS}'"} if throttled else None
            self.rest_api.add_gateway_response(
                f"Gateway{g.response_type.title().replace('_', '')}",
                type=apigw.ResponseType.of(g.response_type),
                status_code=str(g.status) if g.status is not None else None,
                response_headers=retry,
                templates={"application/json": gateway_template(g.code)},
            )

    def _route(self, method: str, path: str, integration: apigw.Integration) -> apigw.Method:
        resource = self.rest_api.root.resource_for_path(path)
        if (method, path) in PUBLIC_ROUTES:
            added = resource.add_method(
                method,
                integration,
                authorization_type=apigw.AuthorizationType.NONE,
                request_validator=self.validator,
            )
            if path.startswith("twilio/"):
                reason = "Twilio cannot send a Cognito token; the webhook checks its signature"
            elif path.startswith("unsubscribe/"):
                reason = ("a mail client unsubscribes without signing in (RFC 8058); the "
                          "signed token in the path is the authority")  # fmt: skip
            elif (method, path) in CONSOLE_ROUTES:
                reason = ("the console's static files and sign-in settings hold no data; the "
                          "API calls the page makes carry the user's token")  # fmt: skip
            else:
                reason = "readiness and the OpenAPI document are public by the REST contract"
            suppress(added, "APIG4", reason)
            suppress(added, "COG4", reason)
            return added
        return resource.add_method(
            method,
            integration,
            authorizer=self.authorizer,
            authorization_type=apigw.AuthorizationType.COGNITO,
            authorization_scopes=[USER_SCOPE, *self.scopes],
            request_validator=self.validator,
        )

    def _users(self, config: DeployConfig) -> None:
        self.user_pool = cognito.UserPool(
            self,
            "Users",
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(email=True, username=False),
            auto_verify=cognito.AutoVerifiedAttrs(email=True),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            mfa=cognito.Mfa.REQUIRED,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            password_policy=cognito.PasswordPolicy(
                min_length=12,
                require_digits=True,
                require_lowercase=True,
                require_uppercase=True,
                require_symbols=True,
            ),
            removal_policy=(
                RemovalPolicy.RETAIN if config.deletion_protection else RemovalPolicy.DESTROY
            ),
            deletion_protection=config.deletion_protection,
        )
        for rule in ("COG3", "COG8"):
            suppress(
                self.user_pool,
                rule,
                "threat protection (the Plus feature plan) is a paid add-on the deployer opts "
                "into; sign-up is closed, MFA is required and passwords are strong",
            )
        for group in GROUPS:
            cognito.CfnUserPoolGroup(
                self,
                f"Group{group.title().replace('-', '')}",
                user_pool_id=self.user_pool.user_pool_id,
                group_name=group,
                description=f"VDQ permissions of {group} (VDQ_GROUP_PERMISSIONS)",
            )
        group_scopes = [
            cognito.ResourceServerScope(scope_name=g, scope_description=f"act as {g}")
            for g in GROUPS
        ]
        self.resource_server = self.user_pool.add_resource_server(
            "ResourceServer", identifier=RESOURCE_SERVER, scopes=group_scopes
        )
        self.scopes = [f"{RESOURCE_SERVER}/{g}" for g in GROUPS]
        self.domain = self.user_pool.add_domain(
            "Domain",
            cognito_domain=cognito.CognitoDomainOptions(domain_prefix=f"{resources.API_DOMAIN_PREFIX}-{Aws.ACCOUNT_ID}"),
        )
        self.machine_client = self._machine_client("MachineClient", config.machine_scopes, None)
        # A client of its own for each producing service (vdq:producerClients): a token's
        # subject is its client's id, which quotas, holds and counts tell producers apart by.
        # Their scopes are their own (vdq:producerScopes): the smoke test's deploy that gives
        # the stack's client operator scopes gives a producer none.
        self.producer_clients = {
            name: self._machine_client(f"ProducerClient{camel(name)}", config.producer_scopes,
                                       f"vdq-{name}")
            for name in config.producer_clients
        }
        self.operator_client = self.user_pool.add_client(
            "OperatorClient",
            generate_secret=False,
            auth_flows=cognito.AuthFlow(user_srp=True),
            disable_o_auth=True,
            prevent_user_existence_errors=True,
        )
        for client in (self.machine_client, *self.producer_clients.values()):
            client.node.add_dependency(self.resource_server)

    def _machine_client(self, construct_id: str, groups: tuple[str, ...],
                        name: str | None) -> cognito.UserPoolClient:  # fmt: skip
        """A client of the OAuth client-credentials flow, with a secret, that may ask for the
        scopes of ``groups``."""
        return self.user_pool.add_client(
            construct_id,
            user_pool_client_name=name,
            generate_secret=True,
            auth_flows=cognito.AuthFlow(),
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(client_credentials=True),
                scopes=[
                    cognito.OAuthScope.custom(f"{RESOURCE_SERVER}/{g}")
                    for g in GROUPS
                    if g in groups
                ],
            ),
            prevent_user_existence_errors=True,
        )
