"""The Kubernetes client tooldojo uses everywhere: `sandboxes.kube`, re-exported.

It lives in the sandbox layer because the kubernetes sandbox backend needs it and that layer may
import nothing above it; job submission (this package) uses the same client.
"""

from sandboxes.kube import (  # noqa: F401
    RESOURCES,
    AlreadyExists,
    Forbidden,
    Invalid,
    K8sApiError,
    K8sClient,
    K8sError,
    K8sUnavailable,
    NotFound,
    Resource,
    TokenBucket,
    resource,
)

__all__ = [
    "RESOURCES", "AlreadyExists", "Forbidden", "Invalid", "K8sApiError", "K8sClient", "K8sError", "K8sUnavailable",
    "NotFound", "Resource", "TokenBucket", "resource",
]
