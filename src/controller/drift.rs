//! Decides whether a live child already says everything its desired state says, so that
//! reconciling an unchanged Memcached issues no write at all.
//!
//! The comparison is a subset check on JSON: fields the API server adds (defaults, status,
//! managed fields) are ignored; fields we set must be present and equal. Quantities under
//! `resources` compare by value, because the API server rewrites them in canonical form
//! (`1024Mi` is stored as `1Gi`).

use serde_json::Value;

use crate::api::sizes::parse_quantity_millis;

/// Whether `live` lacks or contradicts anything in `desired`.
pub fn differs(desired: &Value, live: &Value) -> bool {
    first_difference(desired, live).is_some()
}

/// The path of the first field `live` lacks or contradicts, e.g. `.spec.ports[0].port`.
pub fn first_difference(desired: &Value, live: &Value) -> Option<String> {
    difference(desired, live, false)
}

fn difference(desired: &Value, live: &Value, in_resources: bool) -> Option<String> {
    match (desired, live) {
        (Value::Object(want), Value::Object(have)) => want.iter().find_map(|(key, value)| {
            let in_resources = in_resources || key == "resources";
            let inner = match have.get(key) {
                Some(found) => difference(value, found, in_resources),
                None => (!value.is_null()).then(String::new),
            };
            inner.map(|path| format!(".{key}{path}"))
        }),
        (Value::Array(want), Value::Array(have)) if want.len() != have.len() => {
            Some(format!("[{} items, not {}]", want.len(), have.len()))
        }
        (Value::Array(want), Value::Array(have)) => want
            .iter()
            .zip(have)
            .enumerate()
            .find_map(|(i, (w, h))| difference(w, h, in_resources).map(|p| format!("[{i}]{p}"))),
        (Value::String(want), Value::String(have)) if in_resources && want != have => {
            match (parse_quantity_millis(want), parse_quantity_millis(have)) {
                (Some(a), Some(b)) if a == b => None,
                _ => Some(String::new()),
            }
        }
        (want, have) => (want != have).then(String::new),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_the_server_adds_are_not_drift() {
        let desired = json!({"spec": {"replicas": 3, "template": {"containers": [{"name": "a"}]}}});
        let live = json!({"spec": {"replicas": 3, "revisionHistoryLimit": 10,
            "template": {"containers": [{"name": "a", "terminationMessagePath": "/dev/termination-log"}]}},
            "status": {"replicas": 3}});
        assert!(!differs(&desired, &live));
    }

    #[test]
    fn a_changed_or_missing_field_is_drift() {
        let desired = json!({"spec": {"replicas": 3, "args": ["-m", "64"]}});
        assert!(differs(
            &desired,
            &json!({"spec": {"replicas": 2, "args": ["-m", "64"]}})
        ));
        assert!(differs(&desired, &json!({"spec": {"replicas": 3}})));
        assert!(differs(
            &desired,
            &json!({"spec": {"replicas": 3, "args": ["-m", "64", "-v"]}})
        ));
        assert!(differs(
            &desired,
            &json!({"spec": {"replicas": 3, "args": ["-m", "65"]}})
        ));
    }

    #[test]
    fn quantities_under_resources_compare_by_value() {
        let desired = json!({"resources": {"limits": {"memory": "1024Mi", "cpu": "1000m"}}});
        let live = json!({"resources": {"limits": {"memory": "1Gi", "cpu": "1"}}});
        assert!(!differs(&desired, &live));
        let live = json!({"resources": {"limits": {"memory": "1G", "cpu": "1"}}});
        assert!(differs(&desired, &live));
    }

    #[test]
    fn the_first_difference_is_named_by_its_path() {
        let desired = json!({"spec": {"ports": [{"port": 11211, "name": "memcache"}]}});
        let live = json!({"spec": {"ports": [{"port": 11212, "name": "memcache"}]}});
        assert_eq!(
            first_difference(&desired, &live).as_deref(),
            Some(".spec.ports[0].port")
        );
        assert_eq!(
            first_difference(&desired, &json!({})).as_deref(),
            Some(".spec")
        );
        assert_eq!(first_difference(&desired, &desired), None);
    }

    #[test]
    fn quantity_lookalikes_elsewhere_compare_as_text() {
        assert!(differs(&json!({"image": "1000m"}), &json!({"image": "1"})));
    }
}
