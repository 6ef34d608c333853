//! Builds the pieces of the chart's `values.schema.json`: closed objects (no key the chart
//! does not read is accepted, at any level), typed leaves, and the schemas of the Kubernetes
//! types a value holds (resources, affinity, tolerations, ...) taken from k8s-openapi's own
//! and closed the same way, so that `helm install` refuses a misspelt field anywhere.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// A string, described.
pub fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

/// A string that is not empty.
pub fn non_empty(description: &str) -> Value {
    json!({"type": "string", "minLength": 1, "description": description})
}

/// One of a few strings.
pub fn one_of(description: &str, values: &[&str]) -> Value {
    json!({"type": "string", "enum": values, "description": description})
}

/// A boolean.
pub fn boolean(description: &str) -> Value {
    json!({"type": "boolean", "description": description})
}

/// An integer of at least `minimum`, at most `maximum`.
pub fn integer(description: &str, minimum: i64, maximum: Option<u64>) -> Value {
    let mut schema = json!({"type": "integer", "minimum": minimum, "description": description});
    if let Some(maximum) = maximum {
        schema["maximum"] = json!(maximum);
    }
    schema
}

/// A number of at least 0, or the same written as a string: `helm --set` passes `2.5` as a
/// string (it parses only integers), and the operator's flag takes either.
pub fn decimal(description: &str) -> Value {
    json!({
        "anyOf": [
            {"type": "number", "minimum": 0},
            {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?$"},
        ],
        "description": description,
    })
}

/// A map of strings to strings (labels, a node selector).
pub fn string_map(description: &str) -> Value {
    json!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": description,
    })
}

/// A closed object with these properties, none required.
pub fn closed(description: &str, properties: Map<String, Value>) -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": properties,
        "description": description,
    })
}

/// The schema of the Kubernetes type `T`, closed at every level, its subschemas inlined;
/// quantities and int-or-strings take an integer or a string.
pub fn kubernetes<T: schemars::JsonSchema>(description: &str) -> Value {
    let generator = SchemaSettings::draft07()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    close(&mut schema);
    schema["description"] = json!(description);
    schema
}

/// A list of the Kubernetes type `T`.
pub fn kubernetes_list<T: schemars::JsonSchema>(description: &str) -> Value {
    json!({
        "type": "array",
        "items": kubernetes::<T>(""),
        "description": description,
    })
}

/// Closes every object schema below `schema` (`additionalProperties: false` where it lists
/// its properties and says nothing of others), and drops what Helm users do not need from
/// the Kubernetes schemas: descriptions, formats, the JSON Schema version.
pub fn close(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    for key in ["description", "format", "$schema", "title"] {
        object.remove(key);
    }
    if object.remove("x-kubernetes-int-or-string") == Some(Value::Bool(true)) {
        object.insert("type".to_string(), json!(["integer", "string"]));
    }
    object.retain(|key, _| !key.starts_with("x-kubernetes-"));
    if object.contains_key("properties") && !object.contains_key("additionalProperties") {
        object.insert("additionalProperties".to_string(), Value::Bool(false));
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(close);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(inner) = object.get_mut(key) {
            close(inner);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(inner)) = object.get_mut(key) {
            inner.iter_mut().for_each(close);
        }
    }
}

/// Every path below `schema` where an object schema accepts keys it does not list; empty
/// when the schema is closed throughout (maps of strings, whose keys are free by nature,
/// aside).
pub fn open_objects(schema: &Value, path: &str) -> Vec<String> {
    let mut open = Vec::new();
    let Some(object) = schema.as_object() else {
        return open;
    };
    let is_object = object.get("type") == Some(&json!("object"));
    let free_map = matches!(object.get("additionalProperties"), Some(Value::Object(_)));
    if is_object && !free_map && object.get("additionalProperties") != Some(&Value::Bool(false)) {
        open.push(path.to_string());
    }
    if let Some(Value::Object(properties)) = object.get("properties") {
        for (key, inner) in properties {
            open.extend(open_objects(inner, &format!("{path}.{key}")));
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(inner) = object.get(key) {
            open.extend(open_objects(inner, &format!("{path}[{key}]")));
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Affinity, EnvVar, ResourceRequirements, Toleration};

    #[test]
    fn the_kubernetes_schemas_are_closed_throughout() {
        for (name, schema) in [
            ("affinity", kubernetes::<Affinity>("")),
            ("resources", kubernetes::<ResourceRequirements>("")),
            ("tolerations", kubernetes_list::<Toleration>("")),
            ("env", kubernetes_list::<EnvVar>("")),
        ] {
            assert_eq!(
                open_objects(&schema, name),
                Vec::<String>::new(),
                "{schema:#}"
            );
            assert!(!schema.to_string().contains("$ref"), "{name}: inlined");
        }
    }

    #[test]
    fn quantities_take_an_integer_or_a_string() {
        let schema = kubernetes::<ResourceRequirements>("");
        assert_eq!(
            schema["properties"]["limits"]["additionalProperties"]["type"],
            json!(["integer", "string"]),
            "{schema:#}"
        );
    }
}
