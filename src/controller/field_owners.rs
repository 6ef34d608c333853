//! Hands the fields a child's create (or a status's merge patch) recorded over to the
//! controller's applies, so that a later apply can remove a field it no longer sets.
//!
//! The controller writes its children by server-side apply only, whose fields the API server
//! records under an `Apply` entry of its field manager. Release 0.1.0 created missing children
//! with a plain create (POST), whose fields the API server records under the same manager's
//! `Update` entry; a field that an apply drops is removed only if no other entry owns it, and
//! that entry would. So before the first apply to a child that still carries such an entry
//! (once, after an upgrade from 0.1.0), the controller moves the entry's fields into its
//! `Apply` entry (making the entry that one if there is none) and removes it, as kubectl does
//! when it moves an object from client-side to server-side apply. Fields the API server
//! defaulted come along; an apply that drops them lets the server default them again, to the
//! same values. The same holds for a Memcached's status, which releases before server-side
//! apply of the status wrote with a merge patch (the manager's `Update` entry of the status
//! subresource): its fields are folded into the status's `Apply` entry.
//!
//! Pure: managed-field entries in, entries out. The write (a merge patch conditional on the
//! resourceVersion read) is the controller's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use serde_json::{Map, Value};

use super::cache::compact::recorded_as_update;

const APPLY: &str = "Apply";
const UPDATE: &str = "Update";

fn is(entry: &ManagedFieldsEntry, manager: &str, operation: &str, subresource: &str) -> bool {
    entry.manager.as_deref() == Some(manager)
        && entry.operation.as_deref() == Some(operation)
        && entry.subresource.as_deref().unwrap_or_default() == subresource
}

/// The entries with `manager`'s `Update` entries of `subresource` (empty: the object itself)
/// folded into its `Apply` entry of it, or `None` when it has none to fold.
///
/// The `Apply` entry is the existing one, or else the most recent `Update` entry made into
/// one. Fields of an `Update` entry at another API version than the `Apply` entry's cannot be
/// joined to it (field paths differ between versions) and are left unowned: an apply keeps
/// them, as it keeps any unowned field.
pub fn fold_updates_into_apply(
    entries: &[ManagedFieldsEntry],
    manager: &str,
    subresource: &str,
) -> Option<Vec<ManagedFieldsEntry>> {
    if !recorded_as_update(Some(entries), manager, subresource) {
        return None;
    }
    let is =
        |entry: &ManagedFieldsEntry, operation: &str| is(entry, manager, operation, subresource);
    // The API server lists the most recent entry first.
    let mut apply = match entries.iter().find(|e| is(e, APPLY)) {
        Some(apply) => apply.clone(),
        None => {
            let newest = entries.iter().find(|e| is(e, UPDATE))?;
            ManagedFieldsEntry {
                operation: Some(APPLY.into()),
                ..newest.clone()
            }
        }
    };
    let mut fields = apply.fields_v1.take().map(|f| f.0).unwrap_or_default();
    for update in entries.iter().filter(|e| is(e, UPDATE)) {
        if update.api_version == apply.api_version
            && let Some(update_fields) = &update.fields_v1
        {
            join(&mut fields, &update_fields.0);
        }
    }
    apply.fields_v1 = Some(FieldsV1(fields));
    apply.fields_type = Some("FieldsV1".into());
    let mut folded = Vec::with_capacity(entries.len());
    let mut placed = false;
    for entry in entries {
        let ours = is(entry, APPLY) || is(entry, UPDATE);
        match (ours, placed) {
            (false, _) => folded.push(entry.clone()),
            (true, false) => {
                folded.push(apply.clone());
                placed = true;
            }
            (true, true) => {}
        }
    }
    Some(folded)
}

/// Adds the field set `more` to `fields`. A field set (`FieldsV1`) is a tree of JSON objects
/// keyed by path elements (`f:name`, `k:{...}`, `v:...`, `i:0`, and `.` for the node itself),
/// so the union of two is their merge.
fn join(fields: &mut Value, more: &Value) {
    let Value::Object(more) = more else { return };
    if !fields.is_object() {
        *fields = Value::Object(Map::new());
    }
    let Value::Object(fields) = fields else {
        return;
    };
    for (key, subtree) in more {
        join(
            fields
                .entry(key.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            subtree,
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(manager: &str, operation: &str, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            api_version: Some("apps/v1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    fn fields(entry: &ManagedFieldsEntry) -> &Value {
        &entry.fields_v1.as_ref().expect("fields").0
    }

    #[test]
    fn a_created_childs_update_entry_becomes_the_apply_entry() {
        let created =
            json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:nodeSelector": {}}}}});
        let entries = [
            entry("kube-controller-manager", UPDATE, json!({"f:status": {}})),
            entry("memcached-operator", UPDATE, created.clone()),
        ];
        let folded = fold_updates_into_apply(&entries, "memcached-operator", "").expect("folded");
        assert_eq!(folded.len(), 2);
        assert_eq!(
            folded[0], entries[0],
            "another manager's entry is kept as it is"
        );
        assert_eq!(folded[1].operation.as_deref(), Some(APPLY));
        assert_eq!(folded[1].manager.as_deref(), Some("memcached-operator"));
        assert_eq!(fields(&folded[1]), &created);
    }

    #[test]
    fn an_existing_apply_entry_takes_the_union_of_both() {
        let entries = [
            entry(
                "memcached-operator",
                APPLY,
                json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:replicas": {}}}),
            ),
            entry("someone", UPDATE, json!({"f:spec": {"f:paused": {}}})),
            entry(
                "memcached-operator",
                UPDATE,
                json!({"f:metadata": {"f:labels": {".": {}, "f:b": {}}}, "f:spec": {"f:selector": {}}}),
            ),
        ];
        let folded = fold_updates_into_apply(&entries, "memcached-operator", "").expect("folded");
        assert_eq!(folded.len(), 2, "{folded:?}");
        assert_eq!(folded[0].operation.as_deref(), Some(APPLY));
        assert_eq!(
            fields(&folded[0]),
            &json!({
                "f:metadata": {"f:labels": {".": {}, "f:a": {}, "f:b": {}}},
                "f:spec": {"f:replicas": {}, "f:selector": {}}
            })
        );
        assert_eq!(folded[1], entries[1]);
    }

    #[test]
    fn nothing_to_fold_without_an_update_entry_of_the_manager() {
        let entries = [
            entry("memcached-operator", APPLY, json!({"f:spec": {}})),
            entry("someone-else", UPDATE, json!({"f:spec": {}})),
        ];
        assert_eq!(
            fold_updates_into_apply(&entries, "memcached-operator", ""),
            None
        );
        assert!(!recorded_as_update(
            Some(&entries),
            "memcached-operator",
            ""
        ));
        assert!(recorded_as_update(Some(&entries), "someone-else", ""));
        assert!(!recorded_as_update(None, "memcached-operator", ""));
    }

    #[test]
    fn an_update_of_a_subresource_is_not_the_create() {
        let mut status = entry("memcached-operator", UPDATE, json!({"f:status": {}}));
        status.subresource = Some("status".into());
        assert_eq!(
            fold_updates_into_apply(&[status], "memcached-operator", ""),
            None
        );
    }

    #[test]
    fn a_merge_patched_status_is_folded_into_the_status_apply_only() {
        let subresource = |mut entry: ManagedFieldsEntry, name: &str| {
            entry.subresource = Some(name.into());
            entry
        };
        let entries = [
            subresource(
                entry(
                    "memcached-operator",
                    APPLY,
                    json!({"f:status": {"f:replicas": {}}}),
                ),
                "status",
            ),
            entry("memcached-operator", APPLY, json!({"f:spec": {}})),
            subresource(
                entry(
                    "memcached-operator",
                    UPDATE,
                    json!({"f:status": {"f:auth": {}}}),
                ),
                "status",
            ),
        ];
        let folded =
            fold_updates_into_apply(&entries, "memcached-operator", "status").expect("folded");
        assert_eq!(folded.len(), 2, "{folded:?}");
        assert_eq!(
            fields(&folded[0]),
            &json!({"f:status": {"f:replicas": {}, "f:auth": {}}})
        );
        assert_eq!(folded[0].subresource.as_deref(), Some("status"));
        assert_eq!(
            fields(&folded[1]),
            &json!({"f:spec": {}}),
            "the object's own entry"
        );
    }

    #[test]
    fn an_update_at_another_version_is_removed_but_not_joined() {
        let mut old = entry(
            "memcached-operator",
            UPDATE,
            json!({"f:spec": {"f:old": {}}}),
        );
        old.api_version = Some("apps/v1beta2".into());
        let entries = [
            entry(
                "memcached-operator",
                APPLY,
                json!({"f:spec": {"f:new": {}}}),
            ),
            old,
        ];
        let folded = fold_updates_into_apply(&entries, "memcached-operator", "").expect("folded");
        assert_eq!(folded.len(), 1);
        assert_eq!(fields(&folded[0]), &json!({"f:spec": {"f:new": {}}}));
    }
}
