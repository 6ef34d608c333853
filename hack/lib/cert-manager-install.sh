# What an install with cert-manager (hack/deploy.sh: config/default; hack/helm.sh: the chart)
# names and waits for: the objects both create under the same names (packager/src/config.rs,
# packager/src/chart), and the steps after which the operator serves its webhooks. Sourced
# after hack/lib/steps.sh by a script that defines kubectl and log, never run.

# shellcheck disable=SC2034 # used by the scripts that source this file
NAMESPACE=memcached-operator-system
DEPLOYMENT=memcached-operator-controller-manager
CA_CERTIFICATE=memcached-operator-ca
CERTIFICATE=memcached-operator-serving-cert
SECRET=memcached-operator-webhook-server-cert
CRD=memcacheds.cache.f2367556.dev
MUTATING=memcached-operator-mutating-webhook-configuration
VALIDATING=memcached-operator-validating-webhook-configuration

# injected: whether every caBundle (both webhook configurations' entries and the CRD's
# conversion) is the serving Secret's ca.crt.
injected() {
  local ca bundles bundle
  ca="$(kubectl get secret -n "$NAMESPACE" "$SECRET" -o 'jsonpath={.data.ca\.crt}' 2>/dev/null)"
  [[ -n "$ca" ]] || { echo "no ca.crt in Secret $SECRET yet"; return 1; }
  bundles="$(kubectl get mutatingwebhookconfiguration "$MUTATING" \
    -o 'jsonpath={range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}' 2>&1)
$(kubectl get validatingwebhookconfiguration "$VALIDATING" \
    -o 'jsonpath={range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}' 2>&1)
$(kubectl get crd "$CRD" -o 'jsonpath={.spec.conversion.webhook.clientConfig.caBundle}' 2>&1)"
  while read -r bundle; do
    [[ "$bundle" == "$ca" ]] || { echo "a caBundle is not the issuer's CA yet"; return 1; }
  done <<<"$bundles"
}

# wait_until_serving [operator]: waits (steps.sh) for the CA and serving Certificates to be
# Ready and cainjector to write every caBundle (with `operator`: for the operator to write its
# self-signed certificate's Secret and its CA into every caBundle), the Deployment's ready
# replicas, and the webhooks to answer a server-side dry run of config/samples.
wait_until_serving() {
  if [[ "${1:-}" == operator ]]; then
    step "the operator to write its self-signed CA into every caBundle" injected
  else
    step "Certificate $CA_CERTIFICATE (the CA) to be Ready" jsonpath_is True certificate \
      -n "$NAMESPACE" "$CA_CERTIFICATE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'
    step "Certificate $CERTIFICATE (serving) to be Ready" jsonpath_is True certificate \
      -n "$NAMESPACE" "$CERTIFICATE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'
    step "cainjector to write the CA into every caBundle" injected
  fi
  local replicas
  replicas="$(kubectl get deployment -n "$NAMESPACE" "$DEPLOYMENT" -o 'jsonpath={.spec.replicas}')"
  step "Deployment $DEPLOYMENT to have $replicas ready replicas" \
    jsonpath_is "$replicas" deployment -n "$NAMESPACE" "$DEPLOYMENT" -o 'jsonpath={.status.readyReplicas}'
  step "the operator's webhooks to answer (a server-side dry run of config/samples)" \
    kubectl apply --dry-run=server -k "$ROOT/config/samples"
}
