//! Builds the chart's Deployment template: the Deployment `config/default` installs (the
//! container, its arguments, probes, security context, environment and the webhook
//! certificate's volume, from `deployment` and `config`), with the values read where users
//! tune it: replicas, images, resources, placement, the operator's flags and extra
//! environment, and where the webhooks' certificate comes from (with
//! `certificates.source: operator`, `--self-signed-cert-secret` and a Secret volume that may
//! not exist yet: the operator makes it).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::super::config::CERTIFICATE_SECRET_NAME;
use super::super::config::{NAMESPACE, manager_webhook_patch, meta};
use super::super::deployment;
use super::super::images::Images;
use super::super::release;
use super::template::{Block, Template};
use super::{IMAGE, SELF_SIGNED, labelled};
use memcached_operator::admission::issuers::ALLOWED_ISSUERS_ENV;
use memcached_operator::operator;

/// The flags the chart adds to the Deployment's, each a template expression that renders
/// the whole argument.
const FLAGS: &[&str] = &[
    r#"printf "--leader-elect=%t" .Values.leaderElection.enabled"#,
    r#"printf "--lease-duration=%s" .Values.leaderElection.leaseDuration"#,
    r#"printf "--renew-deadline=%s" .Values.leaderElection.renewDeadline"#,
    r#"printf "--retry-period=%s" .Values.leaderElection.retryPeriod"#,
    r#"printf "--max-concurrent-reconciles=%d" (int .Values.controller.maxConcurrentReconciles)"#,
    r#"printf "--max-requests-in-flight=%d" (int .Values.controller.maxRequestsInFlight)"#,
    r#"printf "--kube-api-qps=%v" .Values.controller.kubeApiQps"#,
    r#"printf "--kube-api-burst=%d" (int64 .Values.controller.kubeApiBurst)"#,
    r#"printf "--request-timeout=%s" .Values.webhooks.requestTimeout"#,
    r#"printf "--log-format=%s" .Values.log.format"#,
];

/// What each environment variable of the Deployment's takes its value from.
fn env_value(name: &str) -> Option<String> {
    match name {
        operator::RELATED_IMAGE_ENV => Some(".Values.relatedImages.memcached | quote".to_string()),
        operator::RELATED_IMAGE_EXPORTER_ENV => {
            Some(".Values.relatedImages.memcachedExporter | quote".to_string())
        }
        operator::RELATED_IMAGE_REFRESHER_ENV => Some(format!(
            ".Values.relatedImages.certRefresher | default ({IMAGE}) | quote"
        )),
        ALLOWED_ISSUERS_ENV => Some(".Values.webhooks.allowedIssuers | quote".to_string()),
        _ => None,
    }
}

fn arguments(template: &mut Template, container: &mut Value) {
    let Some(args) = container["args"].as_array_mut() else {
        return;
    };
    for arg in args.iter_mut() {
        if arg
            .as_str()
            .is_some_and(|a| a.starts_with("--metrics-secure="))
        {
            *arg =
                template.scalar(r#"printf "--metrics-secure=%t" .Values.metrics.secure | quote"#);
        }
    }
    for flag in FLAGS {
        args.push(template.scalar(&format!("{flag} | quote")));
    }
    args.push(template.item(Block::Lines(vec![
        "{{- if .Values.webhooks.enableHttp2 }}".to_string(),
        "- --enable-http2".to_string(),
        "{{- end }}".to_string(),
    ])));
    args.push(template.item(Block::Lines(vec![
        format!("{{{{- if {SELF_SIGNED} }}}}"),
        format!(r#"- {{{{ printf "--self-signed-cert-secret=%s" "{CERTIFICATE_SECRET_NAME}" | quote }}}}"#),
        r#"- {{ printf "--self-signed-ca-validity=%s" .Values.certificates.caValidity | quote }}"#
            .to_string(),
        r#"- {{ printf "--self-signed-cert-validity=%s" .Values.certificates.certValidity | quote }}"#
            .to_string(),
        "{{- end }}".to_string(),
    ])));
    args.push(template.item(Block::Lines(vec![
        "{{- with .Values.log.level }}".to_string(),
        r#"- {{ printf "--log-level=%s" . | quote }}"#.to_string(),
        "{{- end }}".to_string(),
    ])));
}

fn environment(template: &mut Template, container: &mut Value) {
    let Some(env) = container["env"].as_array_mut() else {
        return;
    };
    for variable in env.iter_mut() {
        if let Some(expr) = variable["name"].as_str().and_then(env_value) {
            variable["value"] = template.scalar(&expr);
        }
    }
    env.push(template.item(Block::Spread {
        expr: ".Values.extraEnv".to_string(),
    }));
}

/// Puts the items of `patch`'s list `key` before `target`'s, as kustomize's strategic merge
/// of `config/default`'s patch does.
fn prepend(target: &mut Value, patch: &Value, key: &str) {
    if let (Some(list), Some(more)) = (target[key].as_array_mut(), patch[key].as_array()) {
        list.splice(0..0, more.iter().cloned());
    }
}

/// The Deployment template, its marks in `template`.
pub fn deployment(template: &mut Template) -> Result<Value, serde_json::Error> {
    let mut object = serde_json::to_value(Deployment {
        metadata: ObjectMeta {
            labels: Some(deployment::pod_labels()),
            ..meta(operator::DEPLOYMENT_NAME, Some(NAMESPACE))
        },
        // Its image and RELATED_IMAGE_* values are replaced by the values' below.
        spec: Some(deployment::spec(&Images::for_release(release::VERSION))),
        ..Deployment::default()
    })?;
    labelled(template, &mut object);
    let spec = &mut object["spec"];
    spec["replicas"] = template.scalar(".Values.replicaCount");
    let patch = &manager_webhook_patch()["spec"]["template"]["spec"];
    let pod = &mut spec["template"]["spec"];
    prepend(pod, patch, "volumes");
    if let Some(volumes) = pod["volumes"].as_array_mut() {
        for volume in volumes.iter_mut() {
            if volume["secret"]["secretName"] == CERTIFICATE_SECRET_NAME {
                // The operator writes the Secret once it runs: the pod must start without it.
                template.insert(
                    &mut volume["secret"],
                    Block::Lines(vec![
                        format!("{{{{- if {SELF_SIGNED} }}}}"),
                        "optional: true".to_string(),
                        "{{- end }}".to_string(),
                    ]),
                );
            }
        }
    }
    let container = &mut pod["containers"][0];
    prepend(container, &patch["containers"][0], "volumeMounts");
    container["image"] = template.scalar(&format!("{IMAGE} | quote"));
    container["imagePullPolicy"] = template.scalar(".Values.image.pullPolicy | quote");
    arguments(template, container);
    environment(template, container);
    if let Some(fields) = container.as_object_mut() {
        fields.remove("resources");
    }
    template.insert(
        container,
        Block::Entry {
            key: "resources".to_string(),
            expr: ".Values.resources".to_string(),
        },
    );
    if let Some(fields) = pod.as_object_mut() {
        fields.remove("affinity");
    }
    for (key, expr) in [
        ("affinity", ".Values.affinity"),
        ("nodeSelector", ".Values.nodeSelector"),
        ("tolerations", ".Values.tolerations"),
        ("imagePullSecrets", ".Values.imagePullSecrets"),
    ] {
        template.insert(
            pod,
            Block::OptionalEntry {
                key: key.to_string(),
                expr: expr.to_string(),
            },
        );
    }
    template.insert(
        pod,
        Block::Lines(vec![
            "{{- with .Values.priorityClassName }}".to_string(),
            "priorityClassName: {{ . | quote }}".to_string(),
            "{{- end }}".to_string(),
        ]),
    );
    Ok(json!(object))
}
