# What hack/bench-controller.sh measures, by SUBJECT: `operator` (this operator's release
# build, `run` with the webhooks off) or `peer` (operator-sdk's memcached sample as its pinned
# operator-sdk scaffolds it, hack/tools.sh peer). Each sets what differs between the two: the
# binary, its CRD and ClusterRole, the objects, the workload kind each object becomes, which
# status field says an object is reconciled, and how the process starts and says it is ready.
# Sourced by hack/bench-controller.sh, after ROOT, TARGET and N are set.

case "${SUBJECT:-operator}" in
  operator)
    BIN="$TARGET/release/memcached-operator"
    BUILD_HINT="cargo build --release"
    CRD_FILE="$ROOT/bundle/manifests/cache.f2367556.dev_memcacheds.yaml"
    CRD_NAME=memcacheds.cache.f2367556.dev
    API_PATH=/apis/cache.f2367556.dev/v1beta1
    ROLE_FILE="$ROOT/config/rbac/role.yaml"
    ROLE_NAME=memcached-operator-manager-role
    # Each object becomes a StatefulSet (and a headless Service); 0 replicas, so no pods.
    WORKLOAD=statefulsets
    OBJECT_API_VERSION=cache.f2367556.dev/v1beta1
    OBJECT_SPEC='{"replicas": 0}'
    # Reported: the status says which generation it describes.
    REPORTED_COLUMN=.status.observedGeneration
    REPORTED_PATTERN='^[0-9]+$'
    ;;
  peer)
    BIN="$ROOT/.tools/bin/memcached-peer"
    BUILD_HINT="hack/tools.sh peer"
    CRD_FILE="$ROOT/.tools/peer/crd.yaml"
    CRD_NAME=memcacheds.cache.example.com
    API_PATH=/apis/cache.example.com/v1alpha1
    ROLE_FILE="$ROOT/.tools/peer/role.yaml"
    ROLE_NAME=manager-role
    # Each object becomes a Deployment; its schema asks for 1 to 3 replicas, so each makes a
    # ReplicaSet and a pod, which no node runs here (the pods stay Pending).
    WORKLOAD=deployments
    OBJECT_API_VERSION=cache.example.com/v1alpha1
    OBJECT_SPEC='{"size": 1, "containerPort": 11211}'
    # Reported: its Available condition is True, which it sets once the Deployment exists.
    REPORTED_COLUMN='.status.conditions[?(@.type=="Available")].status'
    REPORTED_PATTERN='^True$'
    ;;
  *)
    echo "bench-controller: unknown SUBJECT '$SUBJECT' (operator or peer)" >&2
    exit 2
    ;;
esac

# start_subject LOG KUBECONFIG: starts the subject in the background as the ServiceAccount
# KUBECONFIG names, logging to LOG; sets subject_pid.
start_subject() {
  case "${SUBJECT:-operator}" in
    operator)
      # Its probe and metrics servers bind port 0 and log where they listen (the listener's
      # own records, at info; everything else at warn, as measured).
      KUBECONFIG="$2" "$BIN" --log-format json --log-level warn,memcached_operator::listener=info \
        run --webhooks=false --leader-elect=false --bind-address 127.0.0.1 --probe-port 0 \
        --metrics-port 0 ${OPERATOR_ARGS:-} >"$1" 2>&1 &
      ;;
    peer)
      # Its metrics and probe servers off ("0"): neither is measured, and a fixed port could be
      # taken. Its log (controller-runtime's zap, production JSON) says when its workers start.
      # MEMCACHED_IMAGE: the image its Deployments run, as its config/manager sets it.
      MEMCACHED_IMAGE="$(<"$ROOT/.tools/peer/memcached-image")" KUBECONFIG="$2" "$BIN" \
        --metrics-bind-address=0 --health-probe-bind-address=0 \
        --zap-devel=false ${OPERATOR_ARGS:-} >"$1" 2>&1 &
      ;;
  esac
  subject_pid=$!
}
