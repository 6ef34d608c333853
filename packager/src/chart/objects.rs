//! Builds the chart's templates other than the Deployment, from the objects `config/`
//! installs: the ServiceAccount and RBAC, the webhook and metrics Services, the webhook
//! configurations, the NetworkPolicies and the ServiceMonitor (each behind its value), and
//! the CRD with its conversion webhook for `crds/`. The webhooks' certificate comes from
//! `certificates.source`: cert-manager's CA chain and serving Certificate, cainjector writing
//! the CA bundles (`certManager`), or the operator's own self-signed one and the RBAC it needs
//! to keep its Secret and write the bundles (`operator`).

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use super::super::certificates::{
    INJECT_CA_FROM, ca_certificate, ca_issuer, certificate, inject_ca_from, selfsigned_issuer,
};
use super::super::config::{
    NAMESPACE, crd_conversion_patch, mutating_configuration, validating_configuration,
    webhook_service,
};
use super::super::monitoring::{metrics_reader_role, metrics_service, service_monitor};
use super::super::yaml::YamlError;
use super::super::{network_policy, roles};
use super::labelled;
use super::template::{Block, Template};
use super::{CERT_MANAGER, SELF_SIGNED};

/// One template file: its objects, each rendered with the marks of one [`Template`], and
/// the condition (a template expression) under which the file renders anything.
pub struct TemplateFile {
    /// Each object and its marks.
    pub objects: Vec<(Template, Value)>,
    /// Renders only when this holds.
    pub condition: Option<&'static str>,
}

impl TemplateFile {
    /// Renders every object, `---` between them, inside the condition.
    pub fn render(&self) -> Result<String, YamlError> {
        let mut documents = Vec::new();
        for (template, object) in &self.objects {
            documents.push(template.render(object)?);
        }
        let body = documents.join("---\n");
        Ok(match self.condition {
            Some(condition) => format!("{{{{- if {condition} }}}}\n{body}{{{{- end }}}}\n"),
            None => body,
        })
    }
}

/// Each object with the chart's labels and no other mark.
fn plain(objects: Vec<Value>) -> Vec<(Template, Value)> {
    objects
        .into_iter()
        .map(|mut object| {
            let mut template = Template::new();
            labelled(&mut template, &mut object);
            (template, object)
        })
        .collect()
}

fn file(objects: Vec<Value>) -> TemplateFile {
    TemplateFile {
        objects: plain(objects),
        condition: None,
    }
}

/// A webhook configuration: labelled, and annotated for cainjector with cert-manager only.
fn annotated(mut object: Value) -> (Template, Value) {
    let mut template = Template::new();
    labelled(&mut template, &mut object);
    template.insert(
        &mut object["metadata"],
        Block::Lines(vec![
            format!("{{{{- if {CERT_MANAGER} }}}}"),
            "annotations:".to_string(),
            format!("  {INJECT_CA_FROM}: {}", inject_ca_from()),
            "{{- end }}".to_string(),
        ]),
    );
    (template, object)
}

/// The ServiceMonitor, its scrape settings and labels from the values.
fn monitor() -> (Template, Value) {
    let mut template = Template::new();
    let mut object = service_monitor(Some(NAMESPACE));
    labelled(&mut template, &mut object);
    template.insert(
        &mut object["metadata"]["labels"],
        Block::Spread {
            expr: ".Values.metrics.serviceMonitor.labels".to_string(),
        },
    );
    let endpoint = &mut object["spec"]["endpoints"][0];
    endpoint["scheme"] = template.scalar(r#"ternary "https" "http" .Values.metrics.secure"#);
    for key in ["interval", "scrapeTimeout"] {
        template.insert(
            endpoint,
            Block::Lines(vec![
                format!("{{{{- with .Values.metrics.serviceMonitor.{key} }}}}"),
                format!("{key}: {{{{ . | quote }}}}"),
                "{{- end }}".to_string(),
            ]),
        );
    }
    (template, object)
}

/// Every template file but the Deployment's, by name under `templates/`.
pub fn templates() -> Result<BTreeMap<&'static str, TemplateFile>, serde_json::Error> {
    use serde_json::to_value as to;
    let mut files = BTreeMap::new();
    files.insert(
        "serviceaccount.yaml",
        file(vec![to(roles::service_account())?]),
    );
    files.insert(
        "rbac.yaml",
        file(vec![
            to(roles::manager_role())?,
            to(roles::manager_role_binding())?,
            to(roles::leader_election_role())?,
            to(roles::leader_election_role_binding())?,
            to(metrics_reader_role())?,
        ]),
    );
    files.insert(
        "services.yaml",
        file(vec![
            to(webhook_service())?,
            to(metrics_service(Some(NAMESPACE)))?,
        ]),
    );
    files.insert(
        "webhooks.yaml",
        TemplateFile {
            objects: vec![
                annotated(to(mutating_configuration())?),
                annotated(to(validating_configuration())?),
            ],
            condition: None,
        },
    );
    files.insert(
        "certificates.yaml",
        TemplateFile {
            objects: plain(vec![
                selfsigned_issuer(),
                ca_certificate(),
                ca_issuer(),
                certificate(),
            ]),
            condition: Some(CERT_MANAGER),
        },
    );
    files.insert(
        "self-signed-rbac.yaml",
        TemplateFile {
            objects: plain(vec![
                to(roles::self_signed_role())?,
                to(roles::self_signed_role_binding())?,
                to(roles::self_signed_cluster_role())?,
                to(roles::self_signed_cluster_role_binding())?,
            ]),
            condition: Some(SELF_SIGNED),
        },
    );
    let policies = network_policy::all(Some(NAMESPACE))
        .into_iter()
        .map(to)
        .collect::<Result<Vec<_>, _>>()?;
    files.insert(
        "networkpolicies.yaml",
        TemplateFile {
            objects: plain(policies),
            condition: Some(".Values.networkPolicy.enabled"),
        },
    );
    files.insert(
        "servicemonitor.yaml",
        TemplateFile {
            objects: vec![monitor()],
            condition: Some(".Values.metrics.serviceMonitor.enabled"),
        },
    );
    Ok(files)
}

/// The CRD as `crds/` holds it: converting through the webhook Service, its caBundle written
/// by cainjector from the serving Certificate (its annotation, which Helm cannot template, is
/// inert without that Certificate), or by the operator with `certificates.source: operator`.
/// Helm installs it before the templates and never upgrades or deletes it.
pub fn crd(crd: &CustomResourceDefinition) -> Result<Value, serde_json::Error> {
    let mut object = serde_json::to_value(crd)?;
    object["spec"]["conversion"] = crd_conversion_patch()["spec"]["conversion"].clone();
    object["metadata"]["annotations"] = json!({INJECT_CA_FROM: inject_ca_from()});
    Ok(object)
}
