//! Builds the Helm chart `charts/memcached-operator/` from the declarations the bundle and
//! `config/` are written from: the CRD in `crds/` (Helm installs it first and never deletes
//! it), templates of the objects `config/default` installs (the Deployment, RBAC, Services,
//! webhook configurations, cert-manager's certificates, NetworkPolicies, an optional
//! ServiceMonitor), `values.yaml` and a closed `values.schema.json`.
//!
//! The webhooks' serving certificate comes from cert-manager by default, as in
//! `config/default`: its Certificate, renewed by cert-manager, and its cainjector writing the
//! CA into the webhook configurations and into the CRD, which Helm cannot template. With
//! `certificates.source: operator` the operator issues a self-signed CA and certificate into
//! the same Secret, renews them, and writes the CA bundles itself (`--self-signed-cert-secret`),
//! so the chart needs nothing installed before it. Every object is named and namespaced as
//! `config/` names it, so the chart installs into `NAMESPACE` only and refuses another.

mod flags;
mod manager;
mod objects;
mod schema;
mod template;
mod values;

use serde_json::{Value, json};

use super::bundle::{Options, crd_file_name};
use super::config::NAMESPACE;
use super::files::{Files, FilesError};
use super::release;
use super::yaml::{YamlError, to_yaml};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use memcached_operator::api;
use template::{Block, Template};

pub use flags::run_command;
pub use schema::open_objects;

/// The chart's name.
pub const CHART_NAME: &str = release::PACKAGE;
/// Where the chart goes, relative to the output directory.
pub const CHART_DIR: &str = "charts/memcached-operator";
/// The template condition of certificates from cert-manager.
const CERT_MANAGER: &str = r#"eq .Values.certificates.source "certManager""#;
/// The template condition of the operator's own self-signed certificate.
const SELF_SIGNED: &str = r#"eq .Values.certificates.source "operator""#;
/// The template expression of the operator's image.
const IMAGE: &str = r#"include "memcached-operator.image" ."#;

/// Adds the chart's labels (`_helpers.tpl`) to the object's `metadata.labels`.
fn labelled(template: &mut Template, object: &mut Value) {
    template.insert(
        &mut object["metadata"]["labels"],
        Block::Lines(vec![
            r#"{{- include "memcached-operator.labels" . | nindent {indent} }}"#.to_string(),
        ]),
    );
}

fn chart_yaml(options: &Options) -> Value {
    let images: Vec<Value> = options
        .images
        .named()
        .iter()
        .map(|(name, image)| json!({"name": name, "image": image}))
        .collect();
    json!({
        "apiVersion": "v2",
        "name": CHART_NAME,
        "description": release::SHORT_DESCRIPTION,
        "type": "application",
        "version": options.version,
        "appVersion": options.version,
        "kubeVersion": format!(">= {}-0", release::MIN_KUBE_VERSION),
        "home": release::REPOSITORY,
        "sources": [release::REPOSITORY],
        "keywords": release::KEYWORDS,
        "maintainers": [{"name": release::MAINTAINER_NAME, "email": release::MAINTAINER_EMAIL}],
        "annotations": {
            "artifacthub.io/license": "Apache-2.0",
            "artifacthub.io/operator": "true",
            "artifacthub.io/operatorCapabilities": release::CAPABILITIES,
            "artifacthub.io/prerelease": (release::MATURITY != "stable").to_string(),
            "artifacthub.io/crds": to_yaml(&json!([{
                "kind": api::KIND,
                "version": api::STORAGE_VERSION,
                "name": api::PLURAL,
                "displayName": api::KIND,
                "description": "A memcached cluster",
            }])).unwrap_or_default(),
            "artifacthub.io/images": to_yaml(&images).unwrap_or_default(),
        },
    })
}

/// `_helpers.tpl`: the image, the labels and the namespace check.
fn helpers() -> String {
    format!(
        r#"{{{{/* The operator's image: by digest when one is given, else by tag (v<appVersion> by default). */}}}}
{{{{- define "memcached-operator.image" -}}}}
{{{{- if .Values.image.digest -}}}}
{{{{ .Values.image.repository }}}}@{{{{ .Values.image.digest }}}}
{{{{- else -}}}}
{{{{ .Values.image.repository }}}}:{{{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}}}
{{{{- end -}}}}
{{{{- end }}}}

{{{{/* The labels of every object the chart installs, besides app.kubernetes.io/name. */}}}}
{{{{- define "memcached-operator.labels" -}}}}
helm.sh/chart: {{{{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}}}
app.kubernetes.io/instance: {{{{ .Release.Name }}}}
app.kubernetes.io/version: {{{{ .Chart.AppVersion | quote }}}}
app.kubernetes.io/managed-by: {{{{ .Release.Service }}}}
{{{{- end }}}}

{{{{/* The webhook Service, the CRD's conversion and the certificates name {NAMESPACE}: the chart installs there only. */}}}}
{{{{- define "memcached-operator.namespace-check" -}}}}
{{{{- if ne .Release.Namespace "{NAMESPACE}" -}}}}
{{{{- fail "memcached-operator installs into the namespace {NAMESPACE} only (the CRD in crds/, which Helm does not template, names its webhook Service there): helm install --namespace {NAMESPACE} --create-namespace" -}}}}
{{{{- end -}}}}
{{{{- end }}}}
"#
    )
}

fn notes() -> String {
    let group = api::GROUP;
    let version = api::STORAGE_VERSION;
    let kind = api::KIND;
    format!(
        r#"memcached-operator {{{{ .Chart.AppVersion }}}} is installed in {{{{ .Release.Namespace }}}}: {{{{ .Values.replicaCount }}}} replica(s)
of {{{{ include "memcached-operator.image" . }}}}, the webhooks' certificate {{{{ if eq .Values.certificates.source "operator" }}}}self-signed by the operator{{{{ else }}}}issued by cert-manager{{{{ end }}}}.

  kubectl -n {{{{ .Release.Namespace }}}} rollout status deployment/{deployment}

A memcached server:

  kubectl apply -f - <<EOF
  apiVersion: {group}/{version}
  kind: {kind}
  metadata:
    name: example
  spec:
    replicas: 1
  EOF
  kubectl get memcacheds

helm uninstall removes the operator and keeps the CRD (Helm never deletes crds/) and so every
Memcached and its servers; a new helm install serves them again. helm upgrade does not upgrade
the CRD: apply the new chart's crds/ first (docs/installing.md).
"#,
        deployment = memcached_operator::operator::DEPLOYMENT_NAME,
    )
}

/// Why the chart could not be rendered.
fn render_error(path: &str, source: impl Into<YamlError>) -> FilesError {
    FilesError::Render {
        path: path.to_string(),
        source: source.into(),
    }
}

/// Renders the chart for these options.
pub fn files(crd: &CustomResourceDefinition, options: &Options) -> Result<Files, FilesError> {
    let mut files = Files::new();
    let path = |name: &str| format!("{CHART_DIR}/{name}");
    files.yaml(&path("Chart.yaml"), &chart_yaml(options))?;

    let settings = values::settings(&options.images)
        .map_err(|e| render_error(&path("values.yaml"), YamlError::Read(e.to_string())))?;
    let text = values::values_yaml(&settings).map_err(|e| render_error(&path("values.yaml"), e))?;
    files.text(&path("values.yaml"), text)?;
    let schema = serde_json::to_string_pretty(&values::schema(&settings))
        .map_err(|e| render_error(&path("values.schema.json"), e))?;
    files.text(&path("values.schema.json"), format!("{schema}\n"))?;

    let crd_object = objects::crd(crd).map_err(|e| render_error(&path("crds"), e))?;
    files.yaml(&path(&format!("crds/{}", crd_file_name())), &crd_object)?;

    files.text(&path("templates/_helpers.tpl"), helpers())?;
    files.text(&path("templates/NOTES.txt"), notes())?;
    let deployment_path = path("templates/deployment.yaml");
    let mut template = Template::new();
    let object =
        manager::deployment(&mut template).map_err(|e| render_error(&deployment_path, e))?;
    let text = template
        .render(&object)
        .map_err(|e| render_error(&deployment_path, e))?;
    files.text(
        &deployment_path,
        format!("{{{{- include \"memcached-operator.namespace-check\" . }}}}\n{text}"),
    )?;
    let templates = objects::templates().map_err(|e| render_error(&path("templates"), e))?;
    for (name, file) in templates {
        let file_path = path(&format!("templates/{name}"));
        let text = file.render().map_err(|e| render_error(&file_path, e))?;
        files.text(&file_path, text)?;
    }
    Ok(files)
}
