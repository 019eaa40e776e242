//! The schema of serverless Functions, Workflows and WorkflowRuns
//! (serverless.minik8s.io/v1alpha1),
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
        ("triggers", "[]fn:FunctionTrigger", false, "Calls made without an HTTP caller: on a schedule or when API objects change."),
    ]),
    ("FunctionTrigger", "What calls the function besides HTTP: exactly one of schedule and event.", &[
        ("schedule", "string", false, "A cron line (five fields, or a macro such as @hourly), as a CronJob's."),
        ("timeZone", "string", false, "The schedule's time zone (IANA name). Defaults to UTC."),
        ("data", "msg:apimachinery.pkg.runtime.RawExtension", false, "The event a scheduled call sends. Defaults to {}."),
        ("event", "fn:FunctionEventTrigger", false, "API objects whose changes call the function with {type, object}."),
    ]),
    ("FunctionEventTrigger", "API objects whose changes call the function.", &[
        ("apiVersion", "string", true, "The objects' API version (v1, apps/v1, ...)."),
        ("kind", "string", true, "The objects' kind."),
        ("labelSelector", "string", false, "Only objects with these labels."),
        ("types", "[]string", false, "ADDED, MODIFIED, DELETED. Defaults to all."),
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
    ("Workflow", "A Workflow is a graph of steps, each calling a Function with the output of the step before: branches on a field of the output, fan-out, fan-in and bounded loops.", &[
        ("metadata", "msg:apimachinery.pkg.apis.meta.v1.ObjectMeta", false, "Standard object's metadata."),
        ("spec", "fn:WorkflowSpec", false, "The steps and the first of them."),
    ]),
    ("WorkflowSpec", "The steps of a Workflow.", &[
        ("start", "string", true, "The step a run begins with, given the run's input."),
        ("steps", "[]fn:WorkflowStep", true, "The steps, each with a unique name."),
    ]),
    ("WorkflowStep", "One step: a function call and where to go after it.", &[
        ("name", "string", true, "The step's name (a DNS label), unique in the workflow."),
        ("function", "string", true, "A Function in the Workflow's namespace."),
        ("retry", "fn:WorkflowRetry", false, "How a failed call is tried again."),
        ("next", "[]fn:WorkflowNext", false, "Rules tried in order; the first that holds is taken. None: the step ends its branch."),
        ("join", "[]string", false, "Steps that must all have finished before this one runs; its input is {step: output} (fan-in)."),
    ]),
    ("WorkflowRetry", "How a failed call is tried again.", &[
        ("limit", "int32", false, "Further attempts after a failed call, 0 to 10. Defaults to 0."),
        ("backoffSeconds", "int64", false, "Wait before the first retry, doubled for each next one, 0 to 300. Defaults to 1."),
    ]),
    ("WorkflowNext", "A rule choosing the steps after a step.", &[
        ("when", "fn:WorkflowWhen", false, "The test on the step's output; none: the rule always holds."),
        ("to", "[]string", true, "The steps started, all with the step's output (fan-out)."),
        ("loop", "fn:WorkflowLoop", false, "Declares an edge that closes a cycle; taken at most maxIterations times in a run, then passed over."),
    ]),
    ("WorkflowWhen", "A test on one field of a step's output: exactly one of equals, notEquals, greaterThan, lessThan, exists.", &[
        ("path", "string", true, "The field, dotted (result.items.0.name); . is the whole output."),
        ("equals", "msg:apimachinery.pkg.runtime.RawExtension", false, "Holds when the field equals this JSON value."),
        ("notEquals", "msg:apimachinery.pkg.runtime.RawExtension", false, "Holds when the field is missing or differs."),
        ("greaterThan", "double", false, "Holds when the field is a number above this."),
        ("lessThan", "double", false, "Holds when the field is a number below this."),
        ("exists", "boolean", false, "Holds when the field's presence is this."),
    ]),
    ("WorkflowLoop", "A declared loop edge.", &[
        ("maxIterations", "int64", true, "How many times the edge may be taken in one run, 1 to 1000."),
    ]),
    ("WorkflowRun", "A WorkflowRun is one execution of a Workflow: its input, each step's status with input, output and timings, and the output.", &[
        ("metadata", "msg:apimachinery.pkg.apis.meta.v1.ObjectMeta", false, "Standard object's metadata."),
        ("spec", "fn:WorkflowRunSpec", false, "The Workflow and the input. Immutable."),
        ("status", "fn:WorkflowRunStatus", false, "The run's phase, steps and output."),
    ]),
    ("WorkflowRunSpec", "What to run.", &[
        ("workflow", "string", true, "A Workflow in the run's namespace."),
        ("input", "msg:apimachinery.pkg.runtime.RawExtension", false, "The first step's input (any JSON)."),
    ]),
    ("WorkflowRunStatus", "The observed state of a run.", &[
        ("phase", "string", false, "Pending, Running, Succeeded or Failed."),
        ("startTime", "msg:apimachinery.pkg.apis.meta.v1.Time", false, "When the first step began."),
        ("completionTime", "msg:apimachinery.pkg.apis.meta.v1.Time", false, "When the run ended."),
        ("output", "msg:apimachinery.pkg.runtime.RawExtension", false, "The last step's output, or {step: output} when several steps end the run."),
        ("message", "string", false, "Why the run failed."),
        ("steps", "[]fn:WorkflowStepStatus", false, "Every step execution in the order they began."),
    ]),
    ("WorkflowStepStatus", "One execution of a step.", &[
        ("name", "string", true, "The step."),
        ("function", "string", false, "The function called."),
        ("iteration", "int32", false, "How many times the step ran before in this run."),
        ("phase", "string", false, "Pending, Running, Succeeded, Failed or Skipped."),
        ("attempts", "int32", false, "Calls made (1 + retries)."),
        ("input", "msg:apimachinery.pkg.runtime.RawExtension", false, "What the function was called with."),
        ("output", "msg:apimachinery.pkg.runtime.RawExtension", false, "What it answered."),
        ("error", "string", false, "The last failed call's error."),
        ("startTime", "msg:apimachinery.pkg.apis.meta.v1.Time", false, "When the first call began."),
        ("completionTime", "msg:apimachinery.pkg.apis.meta.v1.Time", false, "When the step ended."),
        ("durationMillis", "int64", false, "completionTime - startTime in milliseconds."),
        ("rule", "int32", false, "The index of the next rule taken."),
        ("next", "[]string", false, "The steps this one started."),
        ("message", "string", false, "Why a rule was passed over (a loop at its bound)."),
    ]),
];
