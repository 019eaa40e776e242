use super::*;

#[test]
fn a_pod_is_described_as_kubernetes_describes_it() {
    let pod = definition("api.core.v1.Pod", Flavor::V3).unwrap();
    assert!(pod["description"]
        .as_str()
        .unwrap()
        .starts_with("Pod is a collection of containers"));
    assert_eq!(
        pod["properties"]["spec"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.api.core.v1.PodSpec"
    );
    assert!(pod["properties"]["spec"]["description"]
        .as_str()
        .unwrap()
        .starts_with("Specification of the desired behavior"));

    let spec = definition("api.core.v1.PodSpec", Flavor::V2).unwrap();
    assert_eq!(spec["required"], json!(["containers"]));
    let containers = &spec["properties"]["containers"];
    assert_eq!(containers["type"], "array");
    assert_eq!(
        containers["items"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.Container"
    );
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(
        spec["properties"]["nodeSelector"]["additionalProperties"]["type"],
        "string"
    );
    let port = definition("api.core.v1.ContainerPort", Flavor::V2).unwrap();
    assert_eq!(port["properties"]["containerPort"]["format"], "int32");
    assert_eq!(
        definition("apimachinery.pkg.util.intstr.IntOrString", Flavor::V3).unwrap()["format"],
        "int-or-string"
    );
}

#[test]
fn a_kinds_definitions_are_closed_and_carry_its_gvk() {
    let defs = definitions(
        &[("apps", "v1", "Deployment", "api.apps.v1.Deployment".into())],
        Flavor::V3,
    );
    assert_eq!(
        defs["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
    );
    // Every reference resolves.
    let text = Value::Object(defs.clone()).to_string();
    for r in text.split("#/components/schemas/").skip(1) {
        let name = &r[..r.find('"').unwrap()];
        assert!(
            defs.contains_key(name),
            "{name} is referenced but not defined"
        );
    }
}
