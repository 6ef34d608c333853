//! The lazy JSON value: raw text kept byte for byte, expanded paths, edits, and the numbers
//! and strings it refuses.

use serde_json::json;

use super::*;

#[test]
fn a_number_no_double_can_hold_is_refused_and_other_numbers_pass() {
    assert_eq!(out_of_range_number(r#"{"a":1E1211}"#), Some("1E1211"));
    assert_eq!(out_of_range_number(r#"[-2e400]"#), Some("-2e400"));
    assert_eq!(
        out_of_range_number(&format!("[{}]", "9".repeat(400))).map(str::len),
        Some(400)
    );
    // In strings, after escaped quotes, or in range: nothing.
    assert_eq!(
        out_of_range_number(r#"{"a":"1E1211","b\"":"x\"1e999"}"#),
        None
    );
    assert_eq!(
        out_of_range_number(r#"{"a":1.5e300,"b":-0,"c":123456789012345678901234}"#),
        None
    );
    let raw: &RawValue = serde_json::from_str(r#"{"kept":{"n":1E1211}}"#).expect("syntax");
    let error = checked_raw::<serde_json::Error>(raw).expect_err("refused");
    assert!(
        error.to_string().contains("number out of range: 1E1211"),
        "{error}"
    );
}

fn read<'a>(text: &'a str, path: &[&str]) -> Lazy<'a> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    Expand(path)
        .deserialize(&mut deserializer)
        .expect("valid JSON")
}

fn written(value: &Lazy<'_>) -> String {
    let mut out = Vec::new();
    value.write(&mut out).expect("writes");
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn an_unedited_object_is_written_back_byte_for_byte() {
    let text = r#"{"a":{"b": [1, 2.50, "x\u0041"],"c":{"d":null}},"e\"f":"\u00e9","g":true}"#;
    let value = read(text, &["a", "c"]);
    assert!(matches!(value.member("a"), Some(Lazy::Object(_))));
    assert!(matches!(
        value.member("a").and_then(|a| a.member("b")),
        Some(Lazy::Raw(_))
    ));
    assert_eq!(
        written(&value),
        r#"{"a":{"b":[1, 2.50, "x\u0041"],"c":{"d":null}},"e\"f":"\u00e9","g":true}"#
    );
    let tree: Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(value.to_value().expect("JSON"), tree);
}

#[test]
fn values_on_the_path_that_are_not_objects_are_kept_as_they_are() {
    for other in [
        "null",
        "[1,{\"x\":2}]",
        "\"text\"",
        "7",
        "-7",
        "1.5",
        "false",
    ] {
        let text = format!(r#"{{"a":{other}}}"#);
        let value = read(&text, &["a"]);
        let expected: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(value.to_value().expect("JSON"), expected, "{text}");
    }
    assert!(matches!(read("[1]", &["a"]), Lazy::Value(_)));
}

#[test]
fn a_repeated_name_keeps_its_place_and_its_last_value() {
    let value = read(r#"{"a":1,"b":2,"a":3}"#, &[]);
    assert_eq!(written(&value), r#"{"a":3,"b":2}"#);
    let tree: Value = serde_json::from_str(r#"{"a":1,"b":2,"a":3}"#).expect("JSON");
    assert_eq!(value.to_value().expect("JSON"), tree);

    let many: Vec<String> = (0..40)
        .chain(0..40)
        .map(|n| format!("\"k{}\":{n}", n % 30))
        .collect();
    let text = format!("{{{}}}", many.join(","));
    let value = read(&text, &[]);
    let tree: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(value.to_value().expect("JSON"), tree);
    assert!(
        written(&value).starts_with(r#"{"k0":30,"k1":31,"#),
        "{}",
        written(&value)
    );
}

#[test]
fn strings_read_with_and_without_escapes() {
    let value = read(r#"{"a":"plain","b":"tab\there","c":7}"#, &[]);
    let text = |name| {
        value
            .member(name)
            .and_then(|v| v.as_str().map(Cow::into_owned))
    };
    assert_eq!(text("a").as_deref(), Some("plain"));
    assert_eq!(text("b").as_deref(), Some("tab\there"));
    assert_eq!(text("c"), None);
    assert_eq!(text("missing"), None);
}

#[test]
fn escaped_strings_read_as_serde_json_reads_them() {
    let strings = [
        r#""{\"spec\":{\"image\":\"a\\\\b\"}}""#,
        r#""\\\"\/""#,
        r#""tab\tnew\nline\r\b\f""#,
        r#""\u00e9t\u00e9 \"\ud83d\ude00\"""#,
        r#""quote \" then \u0041""#,
        r#""\"""#,
        r#""\\""#,
    ];
    for text in strings {
        let expected: String = serde_json::from_str(text).expect("a JSON string");
        let raw: &RawValue = serde_json::from_str(text).expect("a JSON string");
        assert_eq!(
            Lazy::Raw(raw).as_str().as_deref(),
            Some(expected.as_str()),
            "{text}"
        );
    }
}

#[test]
fn members_are_edited_in_place_or_added_last() {
    let Lazy::Object(mut members) = read(r#"{"a":1,"b":2}"#, &[]) else {
        panic!("an object");
    };
    members.insert("a", Lazy::Value(json!("one")));
    members.insert("c", Lazy::Value(json!(3)));
    assert!(members.remove("b").is_some());
    assert!(members.remove("b").is_none());
    *members.get_or_insert_with("d", Lazy::object) = Lazy::Value(json!([]));
    assert_eq!(
        written(&Lazy::Object(members)),
        r#"{"a":"one","c":3,"d":[]}"#
    );
}

#[test]
fn a_value_that_does_not_decode_names_the_path_inside_it() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)] // Read only to fail.
    struct Outer {
        inner: Inner,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)] // Read only to fail.
    struct Inner {
        count: i32,
    }
    let value = read(r#"{"inner":{"count":"three"}}"#, &[]);
    let error = value.decode::<Outer>().expect_err("count is a string");
    assert_eq!(error.path.as_deref(), Some("inner.count"));
    assert!(
        error
            .to_string()
            .starts_with("inner.count: invalid type: string \"three\"")
    );
    let error = read(r#""text""#, &[])
        .decode::<Outer>()
        .expect_err("not an object");
    assert_eq!(error.path.as_deref(), Some("."));
    assert!(!error.to_string().starts_with('.'), "{error}");
    let error = Lazy::Json("{\"inner\":".to_string())
        .decode::<Outer>()
        .expect_err("not JSON");
    assert_eq!(error.path, None);
    assert!(
        error.to_string().starts_with("EOF while parsing"),
        "{error}"
    );
}
