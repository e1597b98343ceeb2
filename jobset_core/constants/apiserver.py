"""What the API server answers: its Status reasons and codes, the RBAC denial, the causes of an Invalid, and what
the official client logs of a response.

Part of the one vocabulary (`jobset_core.constants` names every one of these); read by the kube runtime's client
and by the emulated API server.
"""

# The RBAC authorizer's denial (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go):
# `jobsets.jobset.x-k8s.io "a" is forbidden: User "system:serviceaccount:ns:sa" cannot create resource
# "jobsets" in API group "jobset.x-k8s.io" in the namespace "default"`
FORBIDDEN_MESSAGE_PATTERN = r'cannot (?P<verb>[a-z]+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)"'
# Status reasons (apimachinery pkg/apis/meta/v1/types.go StatusReason*) and the HTTP codes they come with
STATUS_BAD_REQUEST = "BadRequest"
STATUS_UNAUTHORIZED = "Unauthorized"
STATUS_FORBIDDEN = "Forbidden"
STATUS_NOT_FOUND = "NotFound"
STATUS_METHOD_NOT_ALLOWED = "MethodNotAllowed"
STATUS_CONFLICT = "Conflict"
STATUS_EXPIRED = "Expired"
STATUS_UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"
STATUS_INVALID = "Invalid"
STATUS_TOO_MANY_REQUESTS = "TooManyRequests"
STATUS_INTERNAL_ERROR = "InternalError"
STATUS_SERVICE_UNAVAILABLE = "ServiceUnavailable"
STATUS_TIMEOUT = "Timeout"
STATUS_ALREADY_EXISTS = "AlreadyExists"
STATUS_REASONS = {
    400: STATUS_BAD_REQUEST,
    401: STATUS_UNAUTHORIZED,
    403: STATUS_FORBIDDEN,
    404: STATUS_NOT_FOUND,
    405: STATUS_METHOD_NOT_ALLOWED,
    409: STATUS_CONFLICT,  # also STATUS_ALREADY_EXISTS, for a create whose name is taken
    410: STATUS_EXPIRED,
    415: STATUS_UNSUPPORTED_MEDIA_TYPE,
    422: STATUS_INVALID,
    429: STATUS_TOO_MANY_REQUESTS,
    500: STATUS_INTERNAL_ERROR,
    503: STATUS_SERVICE_UNAVAILABLE,
    504: STATUS_TIMEOUT,
}
# A 404 for a path no resource serves (apimachinery pkg/api/errors/errors.go NewGenericServerResponse)
STATUS_MESSAGE_RESOURCE_NOT_FOUND = "the server could not find the requested resource"
# The kinds of what every API server answers (apimachinery pkg/apis/meta/v1/types.go): an error is a `Status`
# object, a 404 for a path no resource serves included (staging/src/k8s.io/apiserver/pkg/util/notfoundhandler/
# not_found_handler.go: reason NotFound, STATUS_MESSAGE_RESOURCE_NOT_FOUND, no details); API discovery at /apis
# is an `APIGroupList`.
STATUS_KIND = "Status"
API_GROUP_LIST_KIND = "APIGroupList"
# Field-error causes of an Invalid status (apimachinery pkg/apis/meta/v1/types.go CauseType*)
CAUSE_FIELD_VALUE_REQUIRED = "FieldValueRequired"
CAUSE_FIELD_VALUE_INVALID = "FieldValueInvalid"
CAUSE_FIELD_VALUE_FORBIDDEN = "FieldValueForbidden"
# The official client logs every response body at DEBUG (kubernetes/client/rest.py): pod specs with their env.
CLIENT_REST_LOGGER = "kubernetes.client.rest"
CLIENT_RESPONSE_BODY_LOG = "response body"
