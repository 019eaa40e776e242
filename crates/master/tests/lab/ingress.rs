//! Ingress on the host-gw lab (`lab.rs` runs it on its cluster): every
//! node's kube-proxy serves `examples/ingress.yaml` on its port 80 and
//! publishes its address; a pod reaches the host by name; another node
//! reaches each node's proxy by path, by a wildcard host and over TLS; the
//! backends scale under traffic with no failed request; a backend change is
//! served within a second.

use super::*;

/// curl from node `from`'s network namespace to node `to`'s ingress proxy.
fn curl_via(from: u32, to: u32, host: &str, port: u16, url: &str, extra: &str) -> String {
    on_node(
        from,
        &format!(
            "curl -sS --max-time 5 --resolve {host}:{port}:{} {extra} {url}",
            node_ip(to)
        ),
    )
    .unwrap_or_else(|| "FAILED".into())
}

/// The real kubectl (ours has no `create ingress`, `create secret tls` or `patch`).
fn real(args: &str) -> String {
    sh(&format!(
        "{kubectl} --kubeconfig {KUBECONFIG} {args}",
        kubectl = minik8s_testkit::real_kubectl().display()
    ))
}

pub fn ingress_on_every_node(client: &Value) {
    kubectl(&format!(
        "apply -f {}/examples/ingress.yaml",
        repo_root().display()
    ));
    until(90, "the page Deployments ready", || {
        (running_pods("'app in (hello-page,world-page)'").len() == 4).then_some(())
    });
    // Each node's kube-proxy adds its own address.
    let every_node: Vec<String> = (1..=3).map(node_ip).collect();
    until(20, "the three node addresses in the Ingress status", || {
        let i = kubectl_json("get ingress hello-world");
        let ips: Vec<String> = i["status"]["loadBalancer"]["ingress"]
            .as_array()?
            .iter()
            .filter_map(|a| a["ip"].as_str().map(String::from))
            .collect();
        (ips == every_node).then_some(())
    });

    // A pod reaches the host by name: the cluster DNS answers it.
    let lookup = in_pod(client, "nslookup hello.world.minik8s").unwrap_or_default();
    assert!(every_node.iter().all(|ip| lookup.contains(ip)), "{lookup}");
    let out = until(20, "the Ingress host from the client pod", || {
        in_pod(
            client,
            "timeout 5 wget -qO- http://hello.world.minik8s/world",
        )
        .filter(|o| o.starts_with("world from world-page-"))
    });
    eprintln!("from a pod: {out}");

    // Every node's proxy, from another node, by path (the longest prefix wins).
    let host = "hello.world.minik8s";
    for to in 1..=3 {
        let from = to % 3 + 1;
        let world = curl_via(from, to, host, 80, &format!("http://{host}/world"), "");
        assert!(
            world.starts_with("world from world-page-"),
            "node{to}: {world}"
        );
        let hello = curl_via(from, to, host, 80, &format!("http://{host}/"), "");
        assert!(
            hello.starts_with("hello from hello-page-"),
            "node{to}: {hello}"
        );
    }

    // A wildcard host, one label deep.
    real("create ingress apps --rule=*.apps.minik8s/*=world-page:80");
    until(10, "foo.apps.minik8s on node2", || {
        let out = curl_via(
            1,
            2,
            "foo.apps.minik8s",
            80,
            "http://foo.apps.minik8s/world",
            "",
        );
        out.starts_with("world from").then_some(())
    });

    // TLS from a Secret, checked against the CA.
    let dir = format!("{LAB_DIR}-tls");
    sh(&format!(
        "rm -rf {dir} && mkdir -p {dir} && cd {dir} && \
         openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=lab-ca -keyout ca.key -out ca.crt 2>/dev/null && \
         openssl req -newkey rsa:2048 -nodes -subj /CN={host} -keyout tls.key -out tls.csr 2>/dev/null && \
         echo subjectAltName=DNS:{host} > ext.cnf && \
         openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile ext.cnf -out tls.crt 2>/dev/null"
    ));
    real(&format!(
        "create secret tls hello-tls --cert {dir}/tls.crt --key {dir}/tls.key"
    ));
    real(&format!(
        "patch ingress hello-world --type=merge -p '{{\"spec\": {{\"tls\": [{{\"hosts\": [\"{host}\"], \"secretName\": \"hello-tls\"}}]}}}}'"
    ));
    until(10, "HTTPS on node3 with the Secret's certificate", || {
        let out = curl_via(
            1,
            3,
            host,
            443,
            &format!("https://{host}/world"),
            &format!("--cacert {dir}/ca.crt"),
        );
        out.starts_with("world from").then_some(())
    });

    // The backends scale up and down under traffic: every request answered.
    let traffic = std::process::Command::new("nsenter")
        .arg(format!("--net={}", netns(3)))
        .args(["--", "sh", "-c"])
        .arg(format!(
            "for i in $(seq 300); do curl -sS --max-time 5 --resolve {host}:80:{} http://{host}/world || echo FAILED; echo; done",
            node_ip(1)
        ))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting the traffic");
    kubectl("scale deploy world-page --replicas=4");
    until(60, "4 world pages", || {
        (running_pods("app=world-page").len() == 4).then_some(())
    });
    kubectl("scale deploy world-page --replicas=1");
    until(60, "1 world page", || {
        (kubectl("get pods -l app=world-page --no-headers")
            .lines()
            .count()
            == 1)
            .then_some(())
    });
    let out = traffic.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let answers: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(answers.len(), 300, "{text}");
    let bad: Vec<&&str> = answers
        .iter()
        .filter(|a| !a.starts_with("world from"))
        .collect();
    assert!(
        bad.is_empty(),
        "failed during scaling: {bad:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The path moved to another Service: served by node2 within a second.
    let started = Instant::now();
    real("patch ingress hello-world --type=json -p '[{\"op\": \"replace\", \"path\": \"/spec/rules/0/http/paths/1/backend/service/name\", \"value\": \"hello-page\"}]'");
    until(5, "/world moved to hello-page", || {
        let out = curl_via(
            3,
            2,
            host,
            80,
            &format!("http://{host}/world"),
            "-o /dev/null -w %{http_code}",
        );
        (out == "404").then_some(())
    });
    let took = started.elapsed();
    eprintln!("Ingress change served by another node after {took:?}");
    assert!(took < Duration::from_secs(1), "the change took {took:?}");

    real("delete ingress apps");
    real("delete secret hello-tls");
    real(&format!(
        "delete -f {}/examples/ingress.yaml --ignore-not-found",
        repo_root().display()
    ));
    sh(&format!("rm -rf {dir}"));
}
