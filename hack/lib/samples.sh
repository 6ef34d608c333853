# Waits for and describes the sample Memcacheds `make run` applies (hack/run.sh). Sourced,
# never run: the sourcing script defines kubectl, say, since, TIMEOUT and tmp (a scratch
# directory), and may define still_running, a check that the node still runs.

# wait_until WHAT COMMAND...: polls COMMAND (every 0.5 s) until it succeeds, at most TIMEOUT
# seconds; says what it waits for, and what it saw last when it gives up.
wait_until() {
  local what="$1" start=$SECONDS
  shift
  say "waiting for $what"
  until "$@" >"$tmp/last" 2>&1; do
    if ((SECONDS - start >= TIMEOUT)); then
      say "timed out after ${TIMEOUT}s waiting for $what; last check said:"
      sed 's/^/    /' "$tmp/last" >&2
      exit 1
    fi
    if declare -F still_running >/dev/null; then still_running || exit 1; fi
    sleep 0.5
  done
  say "$what: done at $(since)s"
}

# memcacheds_available: every Memcached has Available=True and status.servers.
memcacheds_available() {
  kubectl get memcacheds -A -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
bad = []
for m in items:
    st = m.get("status") or {}
    ok = any(c.get("type") == "Available" and c.get("status") == "True" for c in st.get("conditions") or [])
    if not (ok and st.get("servers")):
        bad.append("%s/%s" % (m["metadata"]["namespace"], m["metadata"]["name"]))
print("not yet Available with servers: " + (", ".join(bad) or "none"))
sys.exit(1 if bad or not items else 0)'
}

# memcached_servers: "NAMESPACE/NAME: SERVER..." for every Memcached.
memcached_servers() {
  kubectl get memcacheds -A -o json | python3 -c '
import json, sys
for m in json.load(sys.stdin)["items"]:
    print("%s/%s: %s" % (m["metadata"]["namespace"], m["metadata"]["name"], " ".join(m["status"]["servers"])))
'
}
