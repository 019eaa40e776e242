//! The schema of serverless Functions (serverless.minik8s.io/v1alpha1),
//! written out as `lws.rs` writes LeaderWorkerSet's (no protobuf message to
//! derive it from), for `kubectl explain` and the clients' OpenAPI.

use super::lws::Definition;

pub(super) const PREFIX: &str = "io.minik8s.serverless.v1alpha1.";

pub(super) const DEFINITIONS: &[Definition] = &[
    ("Function", "A Function is code called over HTTP through the serverless gateway, run as a Deployment of its runtime scaled by the calls in flight, from and to zero.", &[
        ("metadata", "msg:apimachinery.pkg.apis.meta.v1.ObjectMeta", false, "Standard object's metadata."),
        ("spec", "fn:FunctionSpec", false, "The code, its runtime and how it scales."),
        ("status", "fn:FunctionStatus", false, "Where it is called, its instances and conditions."),
    ]),
    ("FunctionSpec", "The code, its runtime and how it scales.", &[
        ("runtime", "string", false, "python (a def handler(event)) or shell (the event on stdin and in $EVENT). Defaults to python."),
        ("source", "string", false, "The code, inline. One of source and sourceFrom is required."),
        ("sourceFrom", "fn:SourceFrom", false, "The code from a ConfigMap key."),
        ("handler", "string", false, "The Python function called with the event. Defaults to handler."),
        ("image", "string", false, "The runtime image. Defaults to minik8s/function-runtime:latest."),
        ("env", "[]msg:api.core.v1.EnvVar", false, "Environment variables of the function's containers."),
        ("resources", "msg:api.core.v1.ResourceRequirements", false, "Resources of each instance."),
        ("scale", "fn:Scale", false, "Scaling bounds and the autoscaler's targets."),
        ("timeoutSeconds", "int64", false, "How long one call may run, 1 to 3600. Defaults to 30."),
    ]),
    ("SourceFrom", "Where the code is, when not inline.", &[
        ("configMapKeyRef", "fn:ConfigMapKey", true, "A key of a ConfigMap in the Function's namespace."),
    ]),
    ("ConfigMapKey", "A key of a ConfigMap.", &[
        ("name", "string", true, "The ConfigMap's name."),
        ("key", "string", true, "The key holding the code."),
    ]),
    ("Scale", "Scaling bounds and the autoscaler's targets (Knative's autoscaling settings).", &[
        ("minScale", "int32", false, "Instances kept when idle. Defaults to 0 (scale to zero)."),
        ("maxScale", "int32", false, "The most instances. Defaults to 10."),
        ("targetConcurrency", "int32", false, "Calls in flight per instance the autoscaler aims at. Defaults to 10."),
        ("stableWindow", "string", false, "The autoscaler's averaging window; the panic window is a tenth of it. Defaults to 60s."),
        ("idleWindow", "string", false, "With no call for this long the function goes to minScale. Defaults to 60s."),
    ]),
    ("FunctionStatus", "The observed state of a Function.", &[
        ("observedGeneration", "int64", false, "The generation last reconciled."),
        ("url", "string", false, "Where the gateway serves the function."),
        ("desiredInstances", "int32", false, "Instances the autoscaler asked for."),
        ("readyInstances", "int32", false, "Instances ready for calls."),
        ("conditions", "[]msg:apimachinery.pkg.apis.meta.v1.Condition", false, "SourceReady (the code parses) and Ready."),
    ]),
];
