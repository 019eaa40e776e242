//! doc/dra.md on the quick start (whose kubelet runs `--fake-gpus 4`): every
//! command of the page, in its order, answers what the page says.

use crate::doc_command::repo;

/// doc/dra.md's commands and a text each answer must contain.
const DOC_COMMANDS: &[(&str, &str)] = &[
    ("kubectl get resourceslices", "gpu.minik8s.io"),
    (
        "kubectl apply -f examples/dra/gpu-job.yaml",
        "deviceclass.resource.k8s.io/gpu.minik8s.io",
    ),
    (
        "kubectl wait --for=condition=complete job/gpu-job --timeout=120s",
        "condition met",
    ),
    ("kubectl logs job/gpu-job", "GPU_DEVICE_0=GPU-"),
    (
        "kubectl apply -f examples/dra/shared-gpu.yaml",
        "resourceclaim.resource.k8s.io/shared-gpu",
    ),
    (
        "kubectl rollout status deploy/gpu-sharers --timeout=120s",
        "successfully rolled out",
    ),
    ("kubectl get resourceclaims", "allocated,reserved"),
    (
        "kubectl get resourceclaim shared-gpu -o jsonpath='{.status.reservedFor[*].name}'",
        "gpu-sharers-",
    ),
    ("kubectl describe resourceclaim shared-gpu", "Reserved For"),
    (
        "kubectl delete -f examples/dra/shared-gpu.yaml -f examples/dra/gpu-job.yaml",
        "deleted",
    ),
];

/// The `kubectl …` lines of the page's `sh` blocks.
fn page_commands() -> Vec<String> {
    let page = std::fs::read_to_string(repo().join("doc/dra.md")).expect("doc/dra.md");
    let mut in_sh = false;
    let mut out = Vec::new();
    for line in page.lines() {
        match line.trim() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            l if in_sh && !l.is_empty() => out.push(l.to_string()),
            _ => {}
        }
    }
    out
}

pub fn passes(kubeconfig: &str) {
    let listed: Vec<String> = DOC_COMMANDS.iter().map(|(c, _)| c.to_string()).collect();
    assert_eq!(
        page_commands(),
        listed,
        "doc/dra.md and this check list the same commands"
    );
    for (command, expect) in DOC_COMMANDS {
        let (ok, text) = crate::doc_command::run(command, &repo(), kubeconfig, &[]);
        assert!(
            ok && text.contains(expect),
            "doc/dra.md: `{command}` should answer {expect:?}:\n{text}"
        );
    }
}
